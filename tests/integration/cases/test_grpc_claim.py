#!/usr/bin/env python3
"""Whether a response is read as gRPC messages is decided by the response, never by the request
(SPEC §10). The sandbox claims `content-type: application/grpc` and puts a forged 5-byte message
prefix in its body; an HTTP/2 upstream on a rule host echoes the body and then the request's
Authorization as plain text. Read as gRPC messages, the forged prefix would end a "message" one
byte before the end of the bearer and release the held-back prefix, all but its last character,
to the sandbox. Read as one body (the response is text/plain), the whole bearer is starred.
Over HTTP/1.1 and HTTP/2 clients (curl), on the TLS listener.

Beside it: a real gRPC-framed response (content-type application/grpc from the upstream) to a
request that did not claim gRPC is still masked message by message and delivered whole.

Why this can fail: a masker that takes the request's word for the response's framing hands the
secret back one character short."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import vgtest as t  # noqa: E402

SECRET = "sk-canary-SECRET-api-0001"
ECHO = b"Bearer " + SECRET.encode()


def handler(req):
    auth = (req.header("authorization") or [""])[0].encode()
    path = dict(req.headers).get(":path", "")
    if path == "/framed":
        # a gRPC-framed answer carrying the bearer in its second message
        msgs = b"".join(b"\x00" + struct.pack(">I", len(m)) + m for m in (b"first", auth))
        return h2server.H2Answer(200, [("content-type", "application/grpc")], [msgs],
                                 trailers=[("grpc-status", "0")])
    # a debug echo: the body as received, then the request's Authorization, as text
    return h2server.H2Answer(200, [("content-type", "text/plain")], [req.body + auth])


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
up = h2server.H2Upstream(certs["cert"], certs["key"], handler)
vg = t.Vaultgate(d, t.example_vault(), pins=[up.pin("api.example.test")],
                 upstream_ca=certs["ca"]).start()
try:
    # message 1's declared length ends it one byte before the end of "Bearer <secret>"
    forged = b"\x00" + struct.pack(">I", len(ECHO) - 1)
    body = os.path.join(d, "body")
    with open(body, "wb") as f:
        f.write(forged)
    for proto in ("--http1.1", "--http2"):
        r = vg.curl("api.example.test", "/echo", [
            proto, "-H", "content-type: application/grpc", "-H", "te: trailers",
            "-H", "authorization: Bearer placeholder", "--data-binary", "@" + body])
        t.check(r.returncode == 0, "%s: curl failed: %s" % (proto, r.stderr[-300:]))
        t.check(SECRET[:8].encode() not in r.stdout,
                "%s: the bearer came back (%d bytes of answer)" % (proto, len(r.stdout)))
        t.check(r.stdout == forged + b"Bearer " + b"*" * len(SECRET),
                "%s: answer %r" % (proto, r.stdout.replace(SECRET[:-1].encode(), b"<SECRET>")))
        got = up.requests[-1]
        t.check(got.header("authorization") == ["Bearer " + SECRET],
                "%s: not injected" % proto)
    # the upstream's own gRPC framing is still honoured, whatever the request claimed
    r = vg.curl("api.example.test", "/framed", ["--http2", "-H", "authorization: Bearer x"])
    t.check(r.returncode == 0, "framed: curl failed: %s" % r.stderr[-300:])
    want = b"\x00" + struct.pack(">I", 5) + b"first"
    want += b"\x00" + struct.pack(">I", len(ECHO)) + b"Bearer " + b"*" * len(SECRET)
    t.check(r.stdout == want, "framed answer %r" % r.stdout.replace(SECRET.encode(), b"<S>"))
    t.check_absent({"the log": vg.stderr(), "the metrics": t.metrics_text(vg)}, [SECRET])
finally:
    vg.stop()
    up.stop()
print("PASS")
