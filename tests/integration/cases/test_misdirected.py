#!/usr/bin/env python3
"""421 when Host names another host than the SNI (or another port), when an absolute-form
target names another host, and for a pipelined second request naming another host (the first
is served; nothing of the second reaches any upstream)."""
import vgtest as t

d, certs, up, vg = t.setup(names=("api.example.test", "other.example.test"))
try:
    for req in (b"GET / HTTP/1.1\r\nHost: other.example.test\r\n\r\n",
                b"GET / HTTP/1.1\r\nHost: API.EXAMPLE.TEST:8080\r\n\r\n",
                b"GET https://other.example.test/ HTTP/1.1\r\nHost: api.example.test\r\n\r\n"):
        r = vg.request("api.example.test", req)
        t.check(r.status == 421, "%r -> %d" % (req, r.status))
        t.check("misdirected" in (r.header("Proxy-Status") or "") or
                "Host" in (r.header("Proxy-Status") or "") or
                "target" in (r.header("Proxy-Status") or ""), "Proxy-Status %r" % r.fields)
    t.check(up.accepts == 0, "upstream contacted for a misdirected request")
    # accepted: case-insensitive host, the listener's own port, 443
    for hv in (b"Api.Example.Test", b"api.example.test:443", b"api.example.test:%d" % vg.port):
        r = vg.request("api.example.test",
                       b"GET / HTTP/1.1\r\nHost: " + hv + b"\r\nConnection: close\r\n\r\n")
        t.check(r.status == 200, "Host %r -> %d" % (hv, r.status))
    n = len(up.requests)
    out = vg.exchange("api.example.test",
                      b"GET /one HTTP/1.1\r\nHost: api.example.test\r\n\r\n"
                      b"GET /two HTTP/1.1\r\nHost: other.example.test\r\n\r\n")
    r1, rest = t.parse_response(out)
    t.check(r1.status == 200, "first pipelined: %r" % r1)
    r2, rest = t.parse_response(rest)
    t.check(r2.status == 421, "second pipelined: %r" % r2)
    t.check(len(up.requests) == n + 1 and up.requests[-1].target == "/one",
            "upstream requests: %r" % [x.target for x in up.requests])
    t.check(b"/two" not in up.all_bytes(), "second request forwarded")
finally:
    vg.stop()
    up.stop()
