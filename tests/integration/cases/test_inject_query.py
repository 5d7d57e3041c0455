#!/usr/bin/env python3
"""query injection: key=<percent-encoded secret> replaces the client's key= (every instance),
other parameters keep their order."""
import vgtest as t

SECRET = "qk canary/QUERY+5555"
ENC = b"qk%20canary%2FQUERY%2B5555"
vault = t.example_vault(
    secrets={"Q_KEY": {"value": SECRET}},
    rules=[{"host_pattern": "query.example.test", "secret": "Q_KEY", "scheme": "query",
            "name": "key"}])
d, certs, up, vg = t.setup(names=("query.example.test",), vault=vault)
try:
    r = vg.request("query.example.test",
                   b"GET /v1/models?alt=json&key=placeholder&x=1&key=again HTTP/1.1\r\n"
                   b"Host: query.example.test\r\nConnection: close\r\n\r\n")
    t.check(r.status == 200, "status %d" % r.status)
    want = (b"GET /v1/models?alt=json&key=" + ENC + b"&x=1 HTTP/1.1\r\n"
            b"Host: query.example.test\r\nAccept-Encoding: identity\r\n\r\n")
    got = up.requests[0].raw
    t.check(got == want, "upstream bytes:\n%r\nwanted:\n%r" % (got, want))
    # absolute-form target: becomes origin-form, then the parameter is added
    r = vg.request("query.example.test",
                   b"GET https://query.example.test/v1/m HTTP/1.1\r\n"
                   b"Host: query.example.test\r\nConnection: close\r\n\r\n")
    t.check(r.status == 200, "absolute-form: %r" % r)
    want = (b"GET /v1/m?key=" + ENC + b" HTTP/1.1\r\nHost: query.example.test\r\n"
            b"Accept-Encoding: identity\r\n\r\n")
    got = up.requests[1].raw
    t.check(got == want, "upstream bytes:\n%r\nwanted:\n%r" % (got, want))
    t.check(b"placeholder" not in up.all_bytes() and b"again" not in up.all_bytes(),
            "client's key reached the upstream")
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr() and ENC.decode() not in vg.stderr(), "secret in the log")
