#!/usr/bin/env python3
"""`Upgrade: h2c` is refused, never turned into a blind tunnel (SPEC §4: only WebSocket upgrades
are forwarded; Upgrade is otherwise hop-by-hop):
- an h2c upgrade request (Connection: Upgrade) on the TLS and on the plain-HTTP listener is
  answered 501 with Proxy-Status and the connection closed; nothing reaches the upstream, and
  HTTP/2 frames sent after it are never relayed;
- `Upgrade: h2c` without `Connection: Upgrade` is no upgrade: forwarded with Upgrade and
  HTTP2-Settings removed;
- an upstream that answers 101 to a request that did not ask for an upgrade gets 502, and
  nothing the client sends afterwards is relayed.

Why this can fail: a proxy that forwards Upgrade and splices after any 101 would hand the
client a raw byte pipe to the upstream (a tunnel around the HTTP/1.1 checks and the masker)."""
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
H2C = (b"GET /h2c HTTP/1.1\r\nHost: %s\r\nUpgrade: h2c\r\n"
       b"Connection: Upgrade, HTTP2-Settings\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00raw-frames"


def handler(req, ci):
    if req.target == "/sneaky101":
        return [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
                ("raw_echo",)]
    return [t.resp_bytes(200, req.raw_head)]


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"], handler)
vg = t.Vaultgate(d, t.example_vault(), upstream_ca=certs["ca"], http=True,
                 pins=[up.pin("api.example.test")]).start()
try:
    # 1. h2c upgrade: 501 on both listeners, connection closed, nothing upstream
    for listener in ("https", "http"):
        if listener == "https":
            s = vg.tls_client("api.example.test", timeout=5)
        else:
            s = t.socket.create_connection(("127.0.0.1", vg.http_port), timeout=5)
        s.sendall(H2C % b"api.example.test")
        r, rest = t.parse_response(b"", reader=lambda: s.recv(65536))
        t.check(r.status == 501 and (r.header("Proxy-Status") or "").startswith("vaultgate"),
                "%s: h2c upgrade -> %r" % (listener, r))
        t.check((r.header("Connection") or "").lower() == "close", "%s: not closed" % listener)
        try:
            s.sendall(PREFACE)
        except OSError:
            pass
        rest += t.read_until_close(s)
        s.close()
        t.check(rest == b"", "%s: bytes after the 501: %r" % (listener, rest[:80]))
    t.check(not up.requests, "an h2c upgrade request reached the upstream")
    t.check(b"raw-frames" not in up.all_bytes() and b"HTTP2-Settings" not in up.all_bytes(),
            "h2c bytes relayed")
    # 2. Upgrade without Connection: Upgrade is no upgrade: hop-by-hop fields removed
    r = vg.request("api.example.test", b"GET /noupg HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Upgrade: h2c\r\nConnection: close\r\n\r\n")
    t.check(r.status == 200, "Upgrade without Connection: Upgrade: %r" % r)
    t.check(up.requests[-1].target == "/noupg" and not up.requests[-1].header("Upgrade"),
            "Upgrade forwarded: %r" % up.requests[-1].raw_head)
    # 3. an unsolicited 101: 502, nothing spliced
    s = vg.tls_client("api.example.test", timeout=5)
    s.sendall(b"GET /sneaky101 HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    r, rest = t.parse_response(b"", reader=lambda: s.recv(65536))
    t.check(r.status == 502, "unsolicited 101 from the upstream -> %r" % r)
    try:
        s.sendall(PREFACE)
    except OSError:
        pass
    rest += t.read_until_close(s)
    s.close()
    t.check(b"raw-frames" not in up.all_bytes() and b"raw-frames" not in rest,
            "bytes spliced after an unsolicited 101")
finally:
    vg.stop()
    up.stop()
