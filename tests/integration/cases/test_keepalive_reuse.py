#!/usr/bin/env python3
"""Keep-alive on both sides: several requests on one client connection, then on new client
connections, all travel over one pooled upstream connection (the fake upstream counts accepts).
Each response goes to the request it answers."""
import vgtest as t


def handler(req, ci):
    return [t.resp_bytes(200, ("answer to %s" % req.target).encode())]


d, certs, up, vg = t.setup(handler=handler)
try:
    s = vg.tls_client("api.example.test")
    buf = b""
    for i in range(5):
        s.sendall(b"GET /r%d HTTP/1.1\r\nHost: api.example.test\r\n\r\n" % i)
        r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
        t.check(r.status == 200 and r.body == b"answer to /r%d" % i, "response %d: %r" % (i, r))
    # pipelined: answered in order
    s.sendall(b"".join(b"GET /p%d HTTP/1.1\r\nHost: api.example.test\r\n\r\n" % i
                       for i in range(3)))
    for i in range(3):
        r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
        t.check(r.body == b"answer to /p%d" % i, "pipelined %d: %r" % (i, r))
    s.close()
    for i in range(3):
        r = vg.request("api.example.test", b"GET /n%d HTTP/1.1\r\nHost: api.example.test\r\n"
                       b"Connection: close\r\n\r\n" % i)
        t.check(r.body == b"answer to /n%d" % i, "new connection %d: %r" % (i, r))
    t.check(len(up.requests) == 11, "upstream saw %d requests" % len(up.requests))
    t.check(up.accepts == 1, "upstream accepted %d connections, wanted 1 (pooled)" % up.accepts)
finally:
    vg.stop()
    up.stop()
