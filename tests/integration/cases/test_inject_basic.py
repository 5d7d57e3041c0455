#!/usr/bin/env python3
"""basic injection: Authorization: Basic base64(username:secret) replaces every Authorization
the client sent (two here), at the first one's place; byte-exact on the upstream."""
import base64
import vgtest as t

SECRET = "ghp_canaryBASICtoken9999"
vault = t.example_vault(
    secrets={"GIT_TOKEN": {"value": SECRET}},
    rules=[{"host_pattern": "git.example.test", "secret": "GIT_TOKEN", "scheme": "basic",
            "username": "x-access-token"}])
d, certs, up, vg = t.setup(names=("git.example.test",), vault=vault)
try:
    r = vg.request("git.example.test",
                   b"POST /repo.git/git-upload-pack HTTP/1.1\r\nHost: git.example.test\r\n"
                   b"Authorization: Basic cGxhY2Vob2xkZXI6eA==\r\nUser-Agent: git/2\r\n"
                   b"authorization: Bearer other\r\nContent-Length: 5\r\n"
                   b"Connection: close\r\n\r\nhello")
    t.check(r.status == 200, "status %d" % r.status)
    cred = base64.b64encode(b"x-access-token:" + SECRET.encode())
    want = (b"POST /repo.git/git-upload-pack HTTP/1.1\r\nHost: git.example.test\r\n"
            b"Authorization: Basic " + cred + b"\r\nUser-Agent: git/2\r\n"
            b"Accept-Encoding: identity\r\nContent-Length: 5\r\n\r\nhello")
    got = up.requests[0].raw
    t.check(got == want, "upstream bytes:\n%r\nwanted:\n%r" % (got, want))
    t.check(b"cGxhY2Vob2xkZXI6eA==" not in up.all_bytes(), "placeholder reached the upstream")
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr() and cred.decode() not in vg.stderr(), "secret in the log")
