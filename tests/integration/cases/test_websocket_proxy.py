#!/usr/bin/env python3
"""WebSocket echo through the explicit proxy (CONNECT, then TLS to vaultgate's leaf, then the
upgrade) and through the plain-HTTP listener (ws:// to a rule's host, which vaultgate carries to
the upstream over TLS on 443): the upstream sees the upgrade request with the secret injected,
the client gets the 101, then frames are echoed both ways; the secret the upstream echoes
inside the stream reaches the client masked.

Why this can fail: without WebSocket support on these listeners the upgrade is refused (501) or
not spliced (the echo never arrives); without injection the upstream sees the placeholder."""
import ssl
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
UPG = (b"GET /ws%d HTTP/1.1\r\nHost: api.example.test\r\nUpgrade: websocket\r\n"
       b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
       b"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer placeholder\r\n\r\n")


def handler(req, ci):
    return [t.WS_101, ("ws_echo", 5)]


def ws_session(s, n):
    s.sendall(UPG % n)
    buf = b""
    while b"\r\n\r\n" not in buf:
        x = s.recv(65536)
        t.check(x, "connection closed before the 101")
        buf += x
    head, _, rest = buf.partition(b"\r\n\r\n")
    t.check(head.startswith(b"HTTP/1.1 101 "), "101 expected: %r" % head)
    req = up.requests[-1]
    t.check(req.target == "/ws%d" % n and req.header("Authorization") == ["Bearer " + SECRET],
            "upgrade request upstream: %r" % req.raw_head)
    t.check(req.header("Upgrade") == ["websocket"], "Upgrade not forwarded")
    # a masked client frame "hi <secret>" and a plain one; the upstream echoes each message
    # in 5-byte frames, masked as a whole by vaultgate
    reader = t.WsReader(lambda: s.recv(65536), rest)
    for payload in (b"hi " + SECRET.encode(), b"second frame"):
        s.sendall(t.ws_frame(payload, 1, mask_key=b"\x0a\x0b\x0c\x0d"))
        want = t.ws_frames(payload.replace(SECRET.encode(), b"*" * len(SECRET)), 1, 5)
        got = b""
        while len(got) < len(want):
            f = reader.frame()
            t.check(f is not None, "connection closed during the echo")
            got += f[5]
        t.check(got == want, "echo %r, wanted %r" % (got, want))

t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"], handler)
vg = t.Vaultgate(d, t.example_vault(), upstream_ca=certs["ca"], http=True, proxy=True,
                 pins=[up.pin("api.example.test")]).start()
try:
    # 1. explicit proxy: CONNECT, TLS with the run's CA, upgrade
    s = t.socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    s.sendall(b"CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        x = s.recv(1)
        t.check(x, "CONNECT: closed")
        head += x
    t.check(head.startswith(b"HTTP/1.1 200"), "CONNECT: %r" % head)
    ts = vg.client_ctx().wrap_socket(s, server_hostname="api.example.test")
    ws_session(ts, 1)
    ts.close()
    # 2. plain-HTTP listener, ws:// to a rule's host: TLS upstream
    s = t.socket.create_connection(("127.0.0.1", vg.http_port), timeout=10)
    ws_session(s, 2)
    s.close()
    t.check(len(up.requests) == 2, "upstream requests %d" % len(up.requests))
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
