#!/usr/bin/env python3
"""Canary values - the secret, a path, a query, header values, bodies (request and response),
and an upstream error text - never appear in vaultgate's stderr, even at debug level, across
injected, allowed, blocked, malformed and failed requests."""
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
CANARIES = [SECRET, "canarypath7", "canaryquery8", "canaryhdr9", "canarybodyup",
            "canarybodydown", "canaryua", "canarycookie"]


def handler(req, ci):
    return [t.resp_bytes(200, b"canarybodydown", [("Set-Cookie", "canarycookie=1")])]


vault = t.example_vault(hosts={"blocked.example.test": "block", "free.example.test": "allow"})
d, certs, up, vg = t.setup(names=("api.example.test", "free.example.test",
                                  "blocked.example.test"), vault=vault, handler=handler,
                           log_level="debug")
try:
    for host in ("api.example.test", "free.example.test", "blocked.example.test"):
        r = vg.request(host, b"POST /canarypath7?q=canaryquery8 HTTP/1.1\r\nHost: " +
                       host.encode() + b"\r\nAuthorization: Bearer canaryhdr9\r\n"
                       b"User-Agent: canaryua\r\nContent-Length: 12\r\nConnection: close\r\n\r\n"
                       b"canarybodyup")
        t.check(r.status in (200, 403), "%s: %d" % (host, r.status))
    vg.request("api.example.test", b"GET /canarypath7?canaryquery8 HTTP/1.1\r\nHost: "
               b"api.example.test\r\nX: canaryhdr9\x01\r\n\r\n")
    vg.request("api.example.test", b"GET /canarypath7 HTTP/1.1\r\nHost: other.test\r\n"
               b"X: canaryhdr9\r\n\r\n")
finally:
    vg.stop()
    up.stop()
log = vg.stderr()
t.check('"event":"request"' in log, "no request events at all")
leaks = [c for c in CANARIES if c in log]
t.check(not leaks, "canaries in the log: %r" % leaks)
t.check(SECRET.encode() in up.all_bytes(), "the injection did not happen (test broken)")
