#!/usr/bin/env python3
"""header injection: <name>: <secret> replaces the client's instance (any letter case)."""
import vgtest as t

SECRET = "hk-canary-HEADER-7777"
vault = t.example_vault(
    secrets={"HDR_KEY": {"value": SECRET}},
    rules=[{"host_pattern": "header.example.test", "secret": "HDR_KEY", "scheme": "header",
            "name": "x-api-key"}])
d, certs, up, vg = t.setup(names=("header.example.test",), vault=vault)
try:
    r = vg.request("header.example.test",
                   b"GET /v1/messages HTTP/1.1\r\nHost: header.example.test\r\n"
                   b"X-Api-Key: placeholder\r\nAccept: application/json\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 200, "status %d" % r.status)
    want = (b"GET /v1/messages HTTP/1.1\r\nHost: header.example.test\r\n"
            b"x-api-key: " + SECRET.encode() + b"\r\nAccept: application/json\r\n"
            b"Accept-Encoding: identity\r\n\r\n")
    got = up.requests[0].raw
    t.check(got == want, "upstream bytes:\n%r\nwanted:\n%r" % (got, want))
    # without any placeholder the header is added
    r = vg.request("header.example.test",
                   b"GET /a HTTP/1.1\r\nHost: header.example.test\r\nConnection: close\r\n\r\n")
    got = up.requests[1].raw
    want = (b"GET /a HTTP/1.1\r\nHost: header.example.test\r\nx-api-key: " + SECRET.encode() +
            b"\r\nAccept-Encoding: identity\r\n\r\n")
    t.check(got == want, "upstream bytes:\n%r\nwanted:\n%r" % (got, want))
    t.check(b"placeholder" not in up.all_bytes(), "placeholder reached the upstream")
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
