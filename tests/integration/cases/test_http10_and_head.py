#!/usr/bin/env python3
"""HTTP/1.0 without Host is served for the SNI host (and closed after); HEAD keeps the
upstream's Content-Length without a body; 204 and 304 carry no body; a chunked request body is
re-framed cleanly (extensions and trailers dropped); an EOF-delimited upstream body reaches an
HTTP/1.1 client chunked."""
import vgtest as t


def handler(req, ci):
    if req.target == "/204":
        return [b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n"]
    if req.target == "/304":
        return [b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n"]
    if req.target == "/eof":
        return [b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil-close", ("close",)]
    if req.target == "/chunky":
        return [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nhello \r\n"
                b"6\r\nchunks\r\n0\r\n\r\n"]
    if req.target == "/continue":
        return [b"HTTP/1.1 100 Continue\r\n\r\n", t.resp_bytes(200, req.body)]
    return [t.resp_bytes(200, b"hello world")]


d, certs, up, vg = t.setup(handler=handler)
try:
    out = vg.exchange("api.example.test", b"GET /old HTTP/1.0\r\nAccept: */*\r\n\r\n")
    r, rest = t.parse_response(out)
    t.check(r.status == 200 and r.body == b"hello world", "1.0: %r" % r)
    t.check(up.requests[-1].raw_head == b"GET /old HTTP/1.1\r\nHost: api.example.test\r\n"
            b"Accept: */*\r\nAuthorization: Bearer sk-canary-SECRET-api-0001\r\n"
            b"Accept-Encoding: identity\r\n\r\n",
            "1.0 upstream head %r" % up.requests[-1].raw_head)
    # HTTP/1.0 client, chunked upstream body: close-delimited to the client, never chunked
    out = vg.exchange("api.example.test", b"GET /chunky HTTP/1.0\r\nHost: api.example.test\r\n\r\n")
    r, _ = t.parse_response(out)
    t.check(r.status == 200 and r.header("Transfer-Encoding") is None and
            r.header("Content-Length") is None and r.body == b"hello chunks" and
            (r.header("Connection") or "").lower() == "close", "1.0 chunked: %r" % r)
    r = vg.request("api.example.test", b"HEAD /h HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Connection: close\r\n\r\n", method="HEAD")
    t.check(r.status == 200 and r.header("Content-Length") == "11" and r.body == b"",
            "HEAD %r" % r)
    s = vg.tls_client("api.example.test")
    buf = b""
    for path, st in ((b"/204", 204), (b"/304", 304)):
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
        r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
        t.check(r.status == st and r.header("Content-Length") is None and
                r.header("Transfer-Encoding") is None, "%s: %r" % (path, r))
    s.sendall(b"POST /chunked HTTP/1.1\r\nHost: api.example.test\r\nTransfer-Encoding: chunked"
              b"\r\n\r\n5;name=val\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
    t.check(r.status == 200, "chunked upload %r" % r)
    t.check(up.requests[-1].raw.endswith(b"Transfer-Encoding: chunked\r\n\r\n"
                                         b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
            "re-framed body %r" % up.requests[-1].raw)
    s.sendall(b"POST /continue HTTP/1.1\r\nHost: api.example.test\r\nExpect: 100-continue\r\n"
              b"Content-Length: 3\r\n\r\nabc")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
    t.check(r.status == 100, "interim %r" % r)
    r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
    t.check(r.status == 200 and r.body == b"abc", "final after 100 %r" % r)
    s.sendall(b"GET /eof HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
    t.check(r.status == 200 and r.body == b"until-close" and
            r.header("Transfer-Encoding") == "chunked", "EOF body %r" % r)
    # and the client connection is still usable
    s.sendall(b"GET /again HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
    t.check(r.status == 200, "after EOF body %r" % r)
    s.close()
finally:
    vg.stop()
    up.stop()
