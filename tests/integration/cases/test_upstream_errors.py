#!/usr/bin/env python3
"""Upstream failures answer with Proxy-Status and never leak the secret: a certificate from an
untrusted CA -> 502 (tls_certificate_error), a certificate for another name -> 502, nothing
listening -> 502 (connection_refused); metrics count them by kind."""
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
t.require_binary()
d = t.tmpdir()
trusted = t.make_ca(d, "trusted")
rogue = t.make_ca(d, "rogue")
bad_crt = t.make_leaf(d, rogue, ["api.example.test"], "badleaf")
wrong_name = t.make_leaf(d, trusted, ["elsewhere.example.test"], "wrongname")
up_bad = t.FakeUpstream(*bad_crt)
up_wrong = t.FakeUpstream(*wrong_name)
vault = t.example_vault(rules=[
    {"host_pattern": "api.example.test", "secret": "API_KEY", "scheme": "bearer"},
    {"host_pattern": "wrong.example.test", "secret": "API_KEY", "scheme": "bearer"},
    {"host_pattern": "down.example.test", "secret": "API_KEY", "scheme": "bearer"}])
vg = t.Vaultgate(d, vault, upstream_ca=trusted[0],
                 pins=[up_bad.pin("api.example.test"), up_wrong.pin("wrong.example.test"),
                       "down.example.test:443:127.0.0.1"]).start()
try:
    for host, kind in (("api.example.test", "tls_certificate_error"),
                       ("wrong.example.test", "tls_certificate_error"),
                       ("down.example.test", "connection_refused")):
        r = vg.request(host, b"GET /x HTTP/1.1\r\nHost: " + host.encode() +
                       b"\r\nAuthorization: Bearer placeholder\r\n\r\n")
        t.check(r.status == 502, "%s: status %d" % (host, r.status))
        ps = r.header("Proxy-Status") or ""
        t.check("error=" + kind in ps, "%s: Proxy-Status %r" % (host, ps))
    t.check(not up_bad.requests and not up_wrong.requests, "a request crossed a bad upstream")
    t.check(SECRET.encode() not in up_bad.all_bytes() + up_wrong.all_bytes(),
            "the secret crossed a TLS connection that failed verification")
    st, m = vg.admin_get("/metrics")
    t.check(b'vaultgate_upstream_errors_total{kind="tls"} 2' in m, "tls errors metric")
    t.check(b'vaultgate_upstream_errors_total{kind="connect"} 1' in m, "connect errors metric")
finally:
    vg.stop()
    up_bad.stop()
    up_wrong.stop()
