#!/usr/bin/env python3
"""Every RFC 9113 §8 rule and SPEC §10 cap on an HTTP/2 request, with raw frames (python3-h2,
outbound validation off): each malformed request is reset with PROTOCOL_ERROR or answered with
the status SPEC asks for (400, 405 for CONNECT and extended CONNECT, 421, 431; 400 for more than
one host field, with or without :authority), none reaches the upstream, and the connection goes
on serving good requests.

Why this can fail: nghttp2's own HTTP checks are off in vaultgate's server session (h2msg.c
does them), so each rule is vaultgate's own code; a missing one forwards what RFC 9113 calls
malformed, or a request HTTP/1.1 would have refused."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import h2raw  # noqa: E402
import vgtest as t  # noqa: E402

PROTOCOL_ERROR = 1


def base(path="/ok", method="GET", authority="api.example.test"):
    return [(":method", method), (":scheme", "https"), (":authority", authority), (":path", path)]


many = base() + [("x-f%d" % i, "v") for i in range(101)]
big = base() + [("x-big", "a" * 16000) for _ in range(5)]
cases = [
    ("upper-case name", base() + [("X-Upper", "1")], None, PROTOCOL_ERROR),
    ("connection field", base() + [("connection", "keep-alive")], None, PROTOCOL_ERROR),
    ("transfer-encoding", base() + [("transfer-encoding", "chunked")], None, PROTOCOL_ERROR),
    ("te other than trailers", base() + [("te", "gzip")], None, PROTOCOL_ERROR),
    ("pseudo after regular", [(":method", "GET"), ("x-a", "1"), (":path", "/"),
                              (":scheme", "https"), (":authority", "api.example.test")],
     None, PROTOCOL_ERROR),
    ("duplicate :path", base() + [(":path", "/again")], None, PROTOCOL_ERROR),
    ("unknown pseudo", base() + [(":foo", "1")], None, PROTOCOL_ERROR),
    ("no :path", [(":method", "GET"), (":scheme", "https"), (":authority", "api.example.test")],
     None, PROTOCOL_ERROR),
    ("leading space in a value", base() + [("x-a", " v")], None, PROTOCOL_ERROR),
    ("CR in a value", base() + [("x-a", "a\rb")], None, PROTOCOL_ERROR),
    ("control byte in a value", base() + [("x-a", "a\x01b")], 400, None),
    ("underscore in a name", base() + [("x_a", "1")], 400, None),
    ("path not origin-form", base(path="x"), 400, None),
    ("host and :authority differ", base() + [("host", "other.example.test")], 400, None),
    # one host field at most, as in HTTP/1.1 (without :authority the last one named the host)
    ("two host fields", [(":method", "GET"), (":scheme", "https"), (":path", "/ok"),
                         ("host", "other.example.test"), ("host", "api.example.test")], 400, None),
    ("two host fields beside :authority", base() + [("host", "api.example.test"),
                                                    ("host", "api.example.test")], 400, None),
    (":authority names another host", base(authority="other.example.test"), 421, None),
    ("CONNECT", [(":method", "CONNECT"), (":authority", "api.example.test:443")], 405, None),
    ("extended CONNECT", [(":method", "CONNECT"), (":protocol", "websocket"),
                          (":scheme", "https"), (":authority", "api.example.test"),
                          (":path", "/ws")], 405, None),
    ("101 fields", many, 431, None),
    ("80 KB field section", big, 431, None),
    ("bad content-length", base(method="POST") + [("content-length", "01")], 400, None),
]

d, certs, up, vg = t.setup(handler=lambda req, ci: [t.resp_bytes(200, b"fine")])
try:
    c = h2raw.Conn(vg.port, vg.ca)
    for name, hdrs, want_status, want_reset in cases:
        sid = c.request(hdrs)
        status, reset, body = c.outcome(sid)
        t.check((status, reset) == (want_status, want_reset),
                "%s: status %r reset %r, wanted %r %r" % (name, status, reset, want_status,
                                                          want_reset))
        # the connection still serves a good request after each
        sid = c.request(base())
        status, reset, body = c.outcome(sid)
        t.check(status == 200 and body == b"fine", "%s: the next request got %r %r" %
                (name, status, reset))
    t.check(all(r.target == "/ok" for r in up.requests), "a refused request reached upstream: %r" %
            [r.target for r in up.requests])
    t.check(len(up.requests) == len(cases), "%d requests upstream" % len(up.requests))
    # content-length that the DATA does not match: reset, and the upstream never sees a whole
    # request (it may see a cut one)
    n = len(up.requests)
    sid = c.request(base(method="POST") + [("content-length", "5")], body=b"abc")
    status, reset, body = c.outcome(sid)
    t.check(reset == PROTOCOL_ERROR, "content-length mismatch: %r %r" % (status, reset))
    t.check(len(up.requests) == n, "the short body reached the upstream as a request")
    c.close()
finally:
    vg.stop()
    up.stop()
