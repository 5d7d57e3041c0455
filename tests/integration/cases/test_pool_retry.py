#!/usr/bin/env python3
"""A pooled upstream connection that dies as it is reused (the upstream reads the request and
closes without answering): a bodyless GET is sent once more on a fresh connection and succeeds;
a POST is not repeated and gets 502. Then an upstream that closes right after an answer that
announced keep-alive, and GETs sent at once after each such answer: the pool may hand out that
connection before its close is seen (a retryable request saves the liveness peek), and every GET
still succeeds."""
import vgtest as t

seen = {}


def handler(req, ci):
    if req.target.startswith("/closing"):
        return [t.resp_bytes(200, b"closing"), ("close",)]
    n = seen[ci] = seen.get(ci, 0) + 1
    if ci == 0 and n == 2:
        return [("close",)]
    if req.method == "POST" and n == 2:
        return [("close",)]
    return [t.resp_bytes(200, b"ok %d" % ci)]


d, certs, up, vg = t.setup(handler=handler)
try:
    s = vg.tls_client("api.example.test")
    buf = b""
    s.sendall(b"GET /a HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
    t.check(r.body == b"ok 0", "first %r" % r)
    s.sendall(b"GET /b HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
    t.check(r.status == 200 and r.body == b"ok 1", "retried GET %r" % r)
    t.check(up.accepts == 2, "accepts %d" % up.accepts)
    s.sendall(b"POST /c HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: 1\r\n\r\nx")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
    t.check(r.status == 502, "POST must not be repeated: %r" % r)
    t.check(sum(1 for x in up.requests if x.method == "POST") == 1, "POST sent twice")
    s.close()
    s = vg.tls_client("api.example.test")
    buf = b""
    for i in range(20):
        s.sendall(b"GET /closing-%d HTTP/1.1\r\nHost: api.example.test\r\n\r\n" % i)
        r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
        t.check(r.status == 200 and r.body == b"closing", "GET %d after a close: %r" % (i, r))
    s.close()
finally:
    vg.stop()
    up.stop()
