#!/usr/bin/env python3
"""Range requests on a credentialed host: vaultgate forwards them without Range and If-Range,
so the upstream sends the whole representation and the secret in it comes back masked. Slices
of an echo, each masked alone, could otherwise be put back together into the secret (a 206 for
bytes 0-9, another for 10-19, ...). A host without a rule keeps Range (nothing to mask there).

Why this can fail: a proxy that forwards Range lets the upstream answer 206 slices; none of them
holds the whole secret, so the masker sees nothing to star, and the slices joined give it."""
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"


def handler(req, ci):
    echo = b"head " + req.raw_head + b" tail"
    rng = req.header("Range")
    if rng and rng[0].startswith("bytes="):
        a, _, b = rng[0][6:].partition("-")
        a, b = int(a), min(int(b), len(echo) - 1)
        return [t.resp_bytes(206, echo[a:b + 1], [("Content-Range", "bytes %d-%d/%d" %
                                                   (a, b, len(echo)))], reason="Partial Content")]
    return [t.resp_bytes(200, echo)]


vault = t.example_vault(hosts={"open.example.test": "allow"})
d, certs, up, vg = t.setup(names=("api.example.test", "open.example.test"), vault=vault,
                           handler=handler)
try:
    pieces = b""
    for a in range(0, 400, 10):
        n = len(up.requests)
        r = vg.request("api.example.test",
                       b"GET /echo HTTP/1.1\r\nHost: api.example.test\r\nAuthorization: Bearer x"
                       b"\r\nRange: bytes=%d-%d\r\nIf-Range: \"etag-1\"\r\nConnection: close"
                       b"\r\n\r\n" % (a, a + 9))
        req = up.requests[n]
        t.check(not req.header("Range") and not req.header("If-Range"),
                "Range forwarded on a credentialed request: %r" % req.raw_head)
        t.check(req.header("Authorization") == ["Bearer " + SECRET], "not injected")
        t.check(r.status == 200, "status %d, wanted the whole representation" % r.status)
        t.check(SECRET.encode() not in r.body and b"*" * len(SECRET) in r.body,
                "whole body not masked")
        pieces += r.body[a:a + 10]
    t.check(SECRET.encode() not in pieces, "slices put together give the secret")
    # no rule: Range passes and the upstream answers 206
    n = len(up.requests)
    r = vg.request("open.example.test", b"GET /echo HTTP/1.1\r\nHost: open.example.test\r\n"
                   b"Range: bytes=0-3\r\nConnection: close\r\n\r\n")
    t.check(up.requests[n].header("Range") == ["bytes=0-3"], "Range dropped without a rule")
    t.check(r.status == 206 and r.body == b"head", "206 expected: %r" % r)
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
