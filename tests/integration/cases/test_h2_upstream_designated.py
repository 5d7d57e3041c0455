#!/usr/bin/env python3
"""The secret goes only to its rule's host, and only over TLS, when the upstreams speak HTTP/2
(SPEC §3, §10): one h2 server answers for api.example.test (the rule's host) and for
other.example.test (an allowed host without a rule) on the same address with one certificate
for both names. Requests to other.example.test - from an h2 client, an HTTP/1.1 client, and
interleaved with requests to api.example.test that hold a pooled h2 connection to that very
address - arrive on connections of their own (SNI other.example.test) with the client's own
placeholder and never the secret; every api.example.test request arrives on a connection whose
SNI is api.example.test, with the secret. Over the plain-HTTP listener a request to the rule's
host still goes out over TLS (h2, the secret injected), while one to the other host goes out
as plain HTTP on port 80 without it.

Why this can fail: pooling h2 connections by address, or coalescing them as browsers may for a
certificate that covers both names, sends other.example.test's requests down the connection
made for the secret's host; injecting by connection rather than by request would then hand the
secret to whoever answers there."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import h2raw  # noqa: E402
import vgtest as t  # noqa: E402
from h2server import H2Answer, H2Upstream  # noqa: E402

SECRET = "sk-canary-SECRET-api-0001"


def handler(r):
    return H2Answer(200, [], [("sleep", 0.2), b"%s on %d" % (r.header(":authority")[0].encode(),
                                                          r.conn)])


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test", "other.example.test"])
up = H2Upstream(certs["cert"], certs["key"], handler)
plain = t.FakeUpstream(None, None, port=80, addr=up.addr, tls=False)
vault = t.example_vault(hosts={"other.example.test": "allow"})
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"], http=True,
                 pins=[up.pin("api.example.test"), up.pin("other.example.test"),
                       "other.example.test:80:" + up.addr]).start()
PH = [("authorization", "Bearer placeholder")]


def h2req(c, host, path):
    return c.request([(":method", "GET"), (":scheme", "https"), (":authority", host),
                      (":path", path)] + PH)


try:
    api = h2raw.Conn(vg.port, vg.ca, sni="api.example.test")
    other = h2raw.Conn(vg.port, vg.ca, sni="other.example.test")
    # the secret's host first: its h2 connection is in the pool when the other host comes
    sid = h2req(api, "api.example.test", "/warm")
    t.check(api.outcome(sid)[0] == 200, "api warm-up")
    # interleaved, concurrent: both hosts at once, from h2 clients and HTTP/1.1 clients
    sids = []
    for i in range(4):
        sids.append((api, h2req(api, "api.example.test", "/a%d" % i)))
        sids.append((other, h2req(other, "other.example.test", "/o%d" % i)))
    curls = [subprocess.Popen(["curl", "-sS", "--http1.1", "--max-time", "30", "-H",
                               "Authorization: Bearer placeholder", "--resolve",
                               "%s:%d:127.0.0.1" % (h, vg.port), "--cacert", vg.ca,
                               "https://%s:%d/h1-%d" % (h, vg.port, i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for i in range(4) for h in ("api.example.test", "other.example.test")]
    for c, sid in sids:
        st, rst, body = c.outcome(sid, timeout=10)
        t.check(st == 200, "stream %d: %r %r %r" % (sid, st, rst, body))
    for p in curls:
        out, err = p.communicate(timeout=60)
        t.check(p.returncode == 0 and b" on " in out, "curl: %r %r" % (out, err))
    api.close()
    other.close()
    # the plain-HTTP listener: the rule's host over TLS, the other host as plain HTTP
    out = vg.http_exchange(b"GET /plain-api HTTP/1.1\r\nHost: api.example.test\r\n"
                           b"Authorization: Bearer placeholder\r\nConnection: close\r\n\r\n")
    r, _ = t.parse_response(out)
    t.check(r.status == 200 and r.body.startswith(b"api.example.test on "), "plain api %r" % r)
    out = vg.http_exchange(b"GET /plain-other HTTP/1.1\r\nHost: other.example.test\r\n"
                           b"Authorization: Bearer placeholder\r\nConnection: close\r\n\r\n")
    r, _ = t.parse_response(out)
    t.check(r.status == 200, "plain other %r" % r)
finally:
    vg.stop()
    up.stop()
    plain.stop()

n = {"api.example.test": 0, "other.example.test": 0}
for r in up.requests:
    host = r.header(":authority")[0]
    n[host] += 1
    sni = up.conns[r.conn].sni
    t.check(sni == host, "%s %s came on a connection made for %r" % (host, r.header(":path"), sni))
    want = ["Bearer " + SECRET] if host == "api.example.test" else ["Bearer placeholder"]
    t.check(r.header("authorization") == want, "%s %s: authorization %r" %
            (host, r.header(":path"), [v[:12] for v in r.header("authorization")]))
    if host != "api.example.test":
        t.check(SECRET not in repr(r.headers) and SECRET.encode() not in r.body,
                "the secret reached other.example.test")
t.check(n == {"api.example.test": 10, "other.example.test": 8}, "requests per host %r" % n)
t.check({c.sni for c in up.conns} == {"api.example.test", "other.example.test"},
        "connections %r" % [(c.sni, c.streams) for c in up.conns])
t.check(len(plain.requests) == 1 and plain.requests[0].target == "/plain-other" and
        plain.requests[0].header("Authorization") == ["Bearer placeholder"] and
        SECRET.encode() not in plain.all_bytes(), "plain upstream got %r" % plain.all_bytes())
t.check(not up.errors, "upstream errors %r" % up.errors)
t.check(SECRET not in vg.stderr(), "secret in vaultgate's log")
