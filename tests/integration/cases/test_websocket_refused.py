#!/usr/bin/env python3
"""A WebSocket upgrade the upstream refuses: the upgrade request goes upstream with the secret
injected; the upstream answers 200 (or 401, chunked) instead of 101; the client gets that
answer, and the same client connection goes on as plain HTTP/1.1 - the next request is parsed,
forwarded and answered normally (nothing spliced, nothing lost). A 101 that switches to
anything but websocket is 502, never a blind tunnel.

Why this can fail: a proxy that switches to splicing once it sees `Upgrade` in the request (or
that leaves its request parser in the upgraded state) never answers the second request, or
relays its bytes raw."""
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
WS = (b"GET %s HTTP/1.1\r\nHost: api.example.test\r\nUpgrade: websocket\r\n"
      b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
      b"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer placeholder\r\n\r\n")


def handler(req, ci):
    if req.target == "/ws-200":
        return [t.resp_bytes(200, b"no websocket here")]
    if req.target == "/ws-401":
        return [b"HTTP/1.1 401 Unauthorized\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"6\r\ndenied\r\n0\r\n\r\n"]
    if req.target == "/ws-h2c":
        return [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n\r\n",
                ("raw_echo",)]
    return [t.resp_bytes(200, b"plain " + req.target.encode())]


d, certs, up, vg = t.setup(handler=handler)
try:
    s = vg.tls_client("api.example.test")
    buf = b""
    for path, want_status, want_body in ((b"/ws-200", 200, b"no websocket here"),
                                         (b"/after1", 200, b"plain /after1"),
                                         (b"/ws-401", 401, b"denied"),
                                         (b"/after2", 200, b"plain /after2")):
        n = len(up.requests)
        if path.startswith(b"/ws"):
            s.sendall(WS % path)
        else:
            s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
        r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
        t.check(r.status == want_status and r.body == want_body, "%r: %r" % (path, r))
        t.check((r.header("Connection") or "").lower() != "close" or path == b"/after2",
                "%r: the connection was closed after a refused upgrade" % path)
        t.check(len(up.requests) == n + 1 and up.requests[-1].target == path.decode(),
                "%r did not reach the upstream as a request" % path)
        if path.startswith(b"/ws"):
            req = up.requests[-1]
            t.check(req.header("Authorization") == ["Bearer " + SECRET], "not injected")
            t.check(req.header("Upgrade") == ["websocket"], "upgrade not forwarded %r" %
                    req.fields)
    s.close()
    # 101 to another protocol: 502, and what the client sends next is not relayed
    s = vg.tls_client("api.example.test")
    s.sendall(WS % b"/ws-h2c")
    r, buf = t.parse_response(b"", reader=lambda: s.recv(65536))
    t.check(r.status == 502, "101 Upgrade: h2c for a WebSocket request: %r" % r)
    try:
        s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\nraw-after-101")
    except OSError:
        pass
    t.read_until_close(s)
    s.close()
    t.check(b"raw-after-101" not in up.all_bytes(), "bytes relayed after a non-websocket 101")
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
