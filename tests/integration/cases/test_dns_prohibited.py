#!/usr/bin/env python3
"""Destination-address rule on DNS answers (SPEC §4): with a loopback DNS server the case starts
(--dns-server, no --resolve pin for these names), names whose only answers are 10.0.0.1,
169.254.169.254, 100.64.0.1, ::ffff:127.0.0.1, ::ffff:<witness>, 64:ff9b::a00:1 (NAT64 of
10.0.0.1) or a loopback address <witness> (and, when isolated, 0.0.0.0, :: and ::1, which would
reach witnesses on 127.0.0.1:443 and [::1]:443) are refused 403 `destination_ip_prohibited` before
anything is dialled: the DNS server saw the query, a TCP listener on the witness address (where
both the loopback and the mapped answers lead) sees no connection, and each refusal is a policy
refusal (blocked_host_log row, route `refused`); the secret never leaves.

Why this can fail: the case runs in a network namespace holding only loopback, so a vaultgate
that dialled 10.0.0.1 / 100.64.0.1 / 169.254.169.254 / 64:ff9b::a00:1 would get ENETUNREACH and
answer 502, not 403; one that dialled the loopback or mapped answer would reach the witness.
test_dns_allow_private.py is the contrast: the same kind of answer covered by --allow-private
is dialled and served."""
import vgtest as t
from dnsserver import DnsServer

ISOLATED = t.isolate_net()
t.log("network namespace of its own: %s" % ISOLATED)
t.require_binary()
SECRET = "sk-canary-SECRET-api-0001"
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
witness = t.Witness("127.0.0.%d" % t.random.randint(20, 250))
W = witness.addr
ZONE = {
    "ten.example.test": ["10.0.0.1"],
    "meta.example.test": ["169.254.169.254"],
    "cgnat.example.test": ["100.64.0.1"],
    "mapped.example.test": ["::ffff:127.0.0.1"],
    "mapwit.example.test": ["::ffff:" + W],
    "nat64.example.test": ["64:ff9b::a00:1"],
    "loop.example.test": [W],
}
extra_witnesses = []
if ISOLATED:
    # alone in the namespace: 127.0.0.1:443 and [::1]:443 are ours, and a dial to 0.0.0.0 or
    # :: lands on them (the local host)
    extra_witnesses = [t.Witness("127.0.0.1"), t.Witness("::1")]
    ZONE.update({"zero.example.test": ["0.0.0.0"], "v6any.example.test": ["::"],
                 "v6loop.example.test": ["::1"]})
dns = DnsServer(ZONE).start()
vault = t.example_vault(rules=[{"host_pattern": n, "secret": "API_KEY", "scheme": "bearer"}
                               for n in sorted(ZONE)])
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"], audit="sqlite",
                 extra=["--dns-server", dns.server]).start()
try:
    for name in sorted(ZONE):
        before = dns.counts.get(name, 0)
        r = vg.request(name, b"GET /p?q=1 HTTP/1.1\r\nHost: " + name.encode() +
                       b"\r\nAuthorization: Bearer placeholder\r\nConnection: close\r\n\r\n")
        ps = r.header("Proxy-Status") or ""
        t.check(r.status == 403 and "error=destination_ip_prohibited" in ps,
                "%s -> %s: %d %r (wanted 403 destination_ip_prohibited)" %
                (name, ZONE[name], r.status, ps))
        t.check(dns.counts.get(name, 0) > before, "%s: the DNS server saw no query (the "
                "refusal must come from the resolved answer)" % name)
        t.check(SECRET.encode() not in r.raw_head + r.body, "%s: secret in the answer" % name)
    for w in [witness] + extra_witnesses:
        t.check(w.accepts == 0, "the witness listener %s:443 got %d connection(s): a "
                "prohibited answer was dialled" % (w.addr, w.accepts))
finally:
    rc = vg.stop()
    dns.stop()
    for w in [witness] + extra_witnesses:
        w.stop()
t.check(rc == 0, "exit %s" % rc)
blocked = sorted(x["host"] for x in t.audit_rows(vg, "blocked"))
t.check(blocked == sorted(ZONE), "blocked_host_log hosts %r, wanted %r" % (blocked, sorted(ZONE)))
routes = sorted((x["host"], x["route"]) for x in t.audit_rows(vg, "routes"))
t.check(routes == [(n, "refused") for n in sorted(ZONE)], "egress_route_log %r" % routes)
t.check(SECRET not in vg.stderr(), "secret in the log")
