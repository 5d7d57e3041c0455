#!/usr/bin/env python3
"""The SPEC §7 /metrics families exist after traffic and count it, and /metrics carries no path,
query, host, header value or secret. Traffic: injected (2xx), allowed (2xx), blocked (403),
protocol error (400), upstream failures of kind dns (NXDOMAIN from the case's loopback DNS
server), connect (nothing listening), tls (untrusted certificate) and protocol (Content-Encoding
br on a credentialed response); two handshakes for one host (a certificate cache miss, then a
hit). Checked: requests_total{decision,code_class}, blocked_total, injections_total{secret},
connections_active, tls_handshakes_total, cert_cache_hits_total, cert_cache_misses_total,
upstream_errors_total{kind}, request_duration_seconds (TYPE histogram, buckets, _sum, _count).

Why this can fail: every family is looked up by its exact name and labels, with the count the
traffic implies."""
import re
import vgtest as t
from dnsserver import DnsServer

SECRET = "sk-canary-SECRET-api-0001"
t.require_binary()
d = t.tmpdir()
trusted = t.make_ca(d, "trusted")
rogue = t.make_ca(d, "rogue")
good = t.make_leaf(d, trusted, ["api.example.test", "free.example.test"], "good")
bad = t.make_leaf(d, rogue, ["mitm.example.test"], "bad")


def handler(req, ci):
    if req.target.startswith("/br"):
        return [t.resp_bytes(200, b"x", [("Content-Encoding", "br")])]
    return [t.resp_bytes(200, b"canarybodymetrics", [("X-Canary", "canaryhdrmetrics")])]


up = t.FakeUpstream(*good, handler=handler)
up_bad = t.FakeUpstream(*bad)
dead = "127.0.%d.%d" % (t.random.randint(0, 255), t.random.randint(2, 254))
dns = DnsServer({}).start()
RULES = [{"host_pattern": h, "secret": "API_KEY", "scheme": "bearer"}
         for h in ("api.example.test", "mitm.example.test", "down.example.test",
                   "nx.example.test")]
vg = t.Vaultgate(d, t.example_vault(rules=RULES, hosts={"blocked.example.test": "block",
                                                        "free.example.test": "allow"}),
                 upstream_ca=trusted[0], extra=["--dns-server", dns.server],
                 pins=[up.pin("api.example.test"), up.pin("free.example.test"),
                       up_bad.pin("mitm.example.test"), "down.example.test:443:" + dead])
vg.start()


def get(host, path=b"/canarypath-m?canaryquery-m=1"):
    return vg.request(host, b"GET " + path + b" HTTP/1.1\r\nHost: " + host.encode() +
                      b"\r\nAuthorization: Bearer canaryplaceholder\r\nConnection: close\r\n\r\n")


try:
    m0 = t.metrics_text(vg)
    t.check(t.metric_value(m0, "vaultgate_cert_cache_misses_total") is not None,
            "cert_cache_misses_total missing before traffic:\n" + m0)
    miss0 = t.metric_value(m0, "vaultgate_cert_cache_misses_total")
    hit0 = t.metric_value(m0, "vaultgate_cert_cache_hits_total") or 0
    hs0 = t.metric_value(m0, "vaultgate_tls_handshakes_total") or 0
    want = [("api.example.test", 200), ("api.example.test", 200), ("free.example.test", 200),
            ("blocked.example.test", 403), ("nx.example.test", 502),
            ("down.example.test", 502), ("mitm.example.test", 502)]
    for host, st in want:
        r = get(host)
        t.check(r.status == st, "%s: %r, wanted %d" % (host, r, st))
    r = get("api.example.test", b"/br")
    t.check(r.status == 502, "br: %r" % r)
    r = vg.request("api.example.test", b"GET / HTTP/1.1\r\nHost: api.example.test\r\nX: \x01\r\n\r\n")
    t.check(r.status == 400, "400: %r" % r)
    m = t.metrics_text(vg)
    problems = []

    def expect(sample, value=None, at_least=None):
        v = t.metric_value(m, sample)
        if v is None:
            problems.append("missing %s" % sample)
        elif value is not None and v != value:
            problems.append("%s = %r, wanted %r" % (sample, v, value))
        elif at_least is not None and v < at_least:
            problems.append("%s = %r, wanted >= %r" % (sample, v, at_least))

    R = 'vaultgate_requests_total{decision="%s",code_class="%s"}'
    expect(R % ("inject", "2xx"), 2)
    expect(R % ("allow", "2xx"), 1)
    expect(R % ("block", "4xx"), 1)
    expect(R % ("inject", "5xx"), 4)   # nx, down, mitm, br
    expect(R % ("error", "4xx"), 1)
    expect("vaultgate_blocked_total", 1)
    # injected: the two 2xx, the br response (the request carried the secret), and maybe the
    # three failed dials (the secret was set before dialling): between 3 and 6
    expect('vaultgate_injections_total{secret="API_KEY"}', at_least=3)
    expect("vaultgate_connections_active", at_least=0)
    expect("vaultgate_tls_handshakes_total", at_least=hs0 + 9)
    expect("vaultgate_cert_cache_hits_total", at_least=hit0 + 1)
    expect("vaultgate_cert_cache_misses_total", at_least=miss0 + 1)
    for kind in ("dns", "connect", "tls", "protocol"):
        expect('vaultgate_upstream_errors_total{kind="%s"}' % kind, 1)
    expect('vaultgate_upstream_errors_total{kind="timeout"}', 0)
    if "# TYPE vaultgate_request_duration_seconds histogram" not in m.splitlines():
        problems.append("request_duration_seconds is not declared a histogram")
    expect('vaultgate_request_duration_seconds_bucket{le="+Inf"}', 9)
    expect("vaultgate_request_duration_seconds_count", 9)
    expect("vaultgate_request_duration_seconds_sum", at_least=0)  # 9 requests in all
    buckets = re.findall(r'^vaultgate_request_duration_seconds_bucket\{le="([^"]+)"\} (\d+)', m,
                         re.M)
    if len(buckets) < 3 or [int(c) for _, c in buckets] != sorted(int(c) for _, c in buckets):
        problems.append("histogram buckets not cumulative: %r" % buckets)
    for line in m.splitlines():
        if line and not line.startswith("#") and not line.startswith("vaultgate_"):
            problems.append("sample without the vaultgate_ prefix: %r" % line)
    for canary in (SECRET, "canarypath", "canaryquery", "canaryplaceholder", "canarybody",
                   "canaryhdr", "example.test", "127.0.", "/br"):
        if canary in m:
            problems.append("/metrics contains %r" % canary)
    if problems:
        t.fail("\n  ".join(["/metrics:"] + problems) + "\n" + m)
finally:
    vg.stop()
    up.stop()
    up_bad.stop()
    dns.stop()
