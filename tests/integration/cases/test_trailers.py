#!/usr/bin/env python3
"""Response trailers are relayed to an HTTP/1.1 client after the last chunk, masked like a head
(a trailer echoing the secret arrives starred) and filtered (framing, routing and content fields
never travel in a trailer); an HTTP/1.0 client, whose framing cannot carry them, gets the body
without them.

Why this can fail: a proxy that drops trailers breaks protocols that report status in them (gRPC
over HTTP/1.1 bridges, checksums); one that forwards them unmasked hands the secret back."""
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"


def handler(req, ci):
    auth = req.header("Authorization")[0].encode()
    return [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Echo, X-Sum\r\n\r\n"
            b"5\r\nhello\r\n0\r\nX-Echo: " + auth + b"\r\nContent-Length: 99\r\n"
            b"X-Sum: abc123\r\nHost: evil.test\r\n\r\n"]


d, certs, up, vg = t.setup(handler=handler)
try:
    raw = vg.exchange("api.example.test", b"GET /t HTTP/1.1\r\nHost: api.example.test\r\n"
                      b"Connection: close\r\n\r\n")
    t.check(SECRET.encode() not in raw, "secret in the response")
    head, _, rest = raw.partition(b"\r\n\r\n")
    t.check(b"Transfer-Encoding: chunked" in head, "not chunked: %r" % head)
    want = (b"5\r\nhello\r\n0\r\nX-Echo: Bearer " + b"*" * len(SECRET) +
            b"\r\nX-Sum: abc123\r\n\r\n")
    t.check(rest == want, "body and trailers %r, wanted %r" % (rest, want))
    raw = vg.exchange("api.example.test", b"GET /t HTTP/1.0\r\nHost: api.example.test\r\n\r\n")
    t.check(raw.endswith(b"\r\n\r\nhello"), "HTTP/1.0: %r" % raw)
    t.check(b"X-Sum" not in raw and SECRET.encode() not in raw, "HTTP/1.0 got trailers")
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
