#!/usr/bin/env python3
"""`Upgrade: h2c` is declined by ignoring it, never answered 101 and never turned into a blind
tunnel (SPEC §4: only WebSocket upgrades are forwarded; Upgrade is otherwise hop-by-hop; §10:
h2c is refused on the HTTP/1.1 listeners):
- an h2c upgrade request (`Connection: Upgrade, HTTP2-Settings`, `Upgrade: h2c`,
  `HTTP2-Settings`) on the TLS listener, the plain-HTTP listener and the explicit proxy
  (absolute-form) is served over HTTP/1.1 and the keep-alive connection goes on: a second
  request on it is answered too; the upstream receives neither Upgrade nor HTTP2-Settings; an
  HTTP/2 preface sent afterwards is a malformed HTTP/1.1 request (400, closed), never relayed;
- `Upgrade: h2c` without `Connection: Upgrade` is no upgrade: forwarded with Upgrade and
  HTTP2-Settings removed;
- an upstream that answers 101 to a request that did not ask for an upgrade gets 502, and
  nothing the client sends afterwards is relayed.

Why this can fail: a proxy that forwards Upgrade and splices after any 101 would hand the
client a raw byte pipe to the upstream (a tunnel around the HTTP/1.1 checks and the masker);
one that stops parsing after an upgrade request it then refuses leaves the client's next
request on that connection unanswered (curl --http2 on http:// sends exactly this)."""
import socket

import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
H2C = (b"GET %s HTTP/1.1\r\nHost: %s\r\nConnection: Upgrade, HTTP2-Settings\r\n"
       b"Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\n\r\n")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00raw-frames"
HOST = b"api.example.test"


def handler(req, ci):
    if req.target == "/sneaky101":
        return [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
                ("raw_echo",)]
    return [t.resp_bytes(200, req.raw_head)]


def connect(listener):
    if listener == "https":
        return vg.tls_client("api.example.test", timeout=5)
    port = vg.http_port if listener == "http" else vg.proxy_port
    return socket.create_connection(("127.0.0.1", port), timeout=5)


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"], handler)
vg = t.Vaultgate(d, t.example_vault(), upstream_ca=certs["ca"], http=True, proxy=True,
                 pins=[up.pin("api.example.test")]).start()
try:
    # 1. an h2c upgrade is ignored: both requests of the connection answered over HTTP/1.1
    for listener in ("https", "http", "proxy"):
        pre = b"http://api.example.test" if listener == "proxy" else b""
        n = len(up.requests)
        s = connect(listener)
        s.sendall(H2C % (pre + b"/one", HOST))
        r1, rest = t.parse_response(b"", reader=lambda: s.recv(65536))
        t.check(r1.status == 200 and r1.raw_head.startswith(b"HTTP/1.1 200") and
                (r1.header("Connection") or "").lower() != "close",
                "%s: the h2c upgrade request -> %r" % (listener, r1))
        s.sendall(b"GET %s/two HTTP/1.1\r\nHost: %s\r\n\r\n" % (pre, HOST))
        try:
            r2, rest = t.parse_response(rest, reader=lambda: s.recv(65536))
        except (EOFError, OSError) as e:
            t.fail("%s: the request after the h2c upgrade request is not answered: %s" % (
                listener, e))
        t.check(r2.status == 200, "%s: the request after it -> %r" % (listener, r2))
        t.check([q.target for q in up.requests[n:]] == ["/one", "/two"],
                "%s: upstream got %r" % (listener, [q.target for q in up.requests[n:]]))
        got = up.requests[n]
        t.check(not got.header("Upgrade") and not got.header("HTTP2-Settings") and
                not got.header("Connection") and b"h2c" not in got.raw_head,
                "%s: Upgrade or HTTP2-Settings forwarded: %r" % (listener, got.raw_head))
        t.check(got.header("Authorization") == ["Bearer " + SECRET],
                "%s: the upgrade request lost its injection" % listener)
        # an HTTP/2 preface is no HTTP/1.1 request: 400 and closed, nothing relayed
        s.sendall(PREFACE)
        r3, rest = t.parse_response(rest, reader=lambda: s.recv(65536))
        t.check(r3.status == 400, "%s: the preface -> %r" % (listener, r3))
        rest += t.read_until_close(s)
        s.close()
        t.check(rest == b"", "%s: bytes after the 400: %r" % (listener, rest[:80]))
        t.check(len(up.requests) == n + 2, "%s: the preface reached the upstream" % listener)
    t.check(b"raw-frames" not in up.all_bytes() and b"HTTP2-Settings" not in up.all_bytes() and
            b"PRI * HTTP/2.0" not in up.all_bytes(), "h2c bytes relayed")
    # a real client: curl --http2 on http:// offers h2c on its first request, reuses the
    # connection for the second
    n = len(up.requests)
    base = "http://api.example.test:%d" % vg.http_port
    p = t.subprocess.run(["curl", "-sS", "--max-time", "20", "--http2", "--resolve",
                          "api.example.test:%d:127.0.0.1" % vg.http_port,
                          "-o", "/dev/null", "-o", "/dev/null",
                          "-w", "%{http_code} %{http_version} %{num_connects}\n",
                          base + "/curl1", base + "/curl2"],
                         stdout=t.subprocess.PIPE, stderr=t.subprocess.PIPE)
    t.check(p.stdout.decode().split("\n")[:2] == ["200 1.1 1", "200 1.1 0"],
            "curl --http2 on the plain listener: %r %r" % (p.stdout, p.stderr[-300:]))
    t.check([q.target for q in up.requests[n:]] == ["/curl1", "/curl2"] and
            not any(q.header("Upgrade") or q.header("HTTP2-Settings") for q in up.requests[n:]),
            "curl: upstream got %r" % [q.raw_head for q in up.requests[n:]])
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
