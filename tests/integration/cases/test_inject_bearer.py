#!/usr/bin/env python3
"""bearer injection: the upstream receives exactly the rebuilt head with the real secret in
place of the client's placeholder, never both; the response comes back unchanged."""
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"

d, certs, up, vg = t.setup(handler=t.echo_handler)
try:
    r = vg.request("api.example.test",
                   b"GET /v1/x?q=1 HTTP/1.1\r\nHost: api.example.test:%d\r\n"
                   b"Authorization: Bearer placeholder\r\nAccept: */*\r\n"
                   b"Connection: close\r\n\r\n" % vg.port)
    t.check(r.status == 200, "status %d" % r.status)
    t.check(len(up.requests) == 1, "upstream got %d requests" % len(up.requests))
    got = up.requests[0].raw
    # the injected field takes the placeholder's place; Host (rewritten to the upstream's
    # authority) comes first; Connection is hop-by-hop and never forwarded; a credentialed
    # request asks for an identity-coded response (reflection masking)
    want = (b"GET /v1/x?q=1 HTTP/1.1\r\nHost: api.example.test\r\n"
            b"Authorization: Bearer " + SECRET.encode() + b"\r\nAccept: */*\r\n"
            b"Accept-Encoding: identity\r\n\r\n")
    t.check(got == want, "upstream bytes:\n%r\nwanted:\n%r" % (got, want))
    t.check(b"placeholder" not in up.all_bytes(), "placeholder reached the upstream")
    t.check(up.all_bytes().count(SECRET.encode()) == 1, "secret sent once")
    # curl, as in the issue
    r2 = vg.curl("api.example.test", "/v1/x", ["-H", "Authorization: Bearer placeholder"])
    t.check(r2.returncode == 0, "curl: %s" % r2.stderr.decode())
    t.check(up.requests[-1].header("Authorization") == ["Bearer " + SECRET], "curl injection")
finally:
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit code %s" % rc)
t.check(SECRET not in vg.stderr(), "secret in the log")
