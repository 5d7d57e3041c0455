#!/usr/bin/env python3
"""The address rule follows the IANA special-purpose registries (SPEC §4): a name whose only
answer lies in a block the registries do not call globally reachable is refused 403
`destination_ip_prohibited` before anything is dialled, and recorded (blocked_host_log row,
route `refused`); a name whose answer lies in one of the blocks the registries carve out as
globally reachable (192.0.0.9 inside 192.0.0.0/24, 2001:1::2 and 2001:30::/28 inside 2001::/23,
192.31.196.0/24) is dialled like any public address.

The case runs in a network namespace holding only loopback, with a loopback DNS server it starts
(no --resolve pins): a dialled address fails with ENETUNREACH, which vaultgate answers 502, so
"dialled" and "refused" are told apart without anything leaving the machine.

Why this can fail: a rule written as a hand list of ranges missed 192.88.99.0/24 (the deprecated
6to4 relay anycast block), 192.88.99.2, the rest of 2001::/23 (2001:4::1, the terminated ORCHID
block 2001:10::/28) and 6to4 or IPv4-compatible forms of public addresses: those were dialled
(502); and it refused 192.0.0.9 with the rest of 192.0.0.0/24 (403)."""
import vgtest as t
from dnsserver import DnsServer

if not t.isolate_net():
    t.skip("needs a network namespace of its own (reachable answers are dialled)")
t.require_binary()
d = t.tmpdir()
REFUSED = {
    "relay6to4.example.test": "192.88.99.1",
    "relay6a44.example.test": "192.88.99.2",
    "dummy4.example.test": "192.0.0.8",
    "bench.example.test": "198.18.0.1",
    "future.example.test": "240.0.0.1",
    "ietf6.example.test": "2001:4::1",
    "orchid.example.test": "2001:10::1",
    "teredo.example.test": "2001::1",
    "sixtofour.example.test": "2002:808:808::1",
    "compat.example.test": "::808:808",
    "dummy6.example.test": "100:0:0:1::1",
    "srv6.example.test": "5f00::1",
    "doc6.example.test": "3fff::1",
}
REACHABLE = {
    "pcp.example.test": "192.0.0.9",
    "as112.example.test": "192.31.196.1",
    "turn6.example.test": "2001:1::2",
    "dets.example.test": "2001:30::1",
}
dns = DnsServer({n: [a] for n, a in list(REFUSED.items()) + list(REACHABLE.items())}).start()
vg = t.Vaultgate(d, t.example_vault(), http=True, audit="sqlite",
                 extra=["--dns-server", dns.server]).start()
problems = []
try:
    for name in sorted(REFUSED) + sorted(REACHABLE):
        addr = REFUSED.get(name) or REACHABLE[name]
        before = dns.counts.get(name, 0)
        out = vg.http_exchange(b"GET /x HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
                               name.encode())
        try:
            r = t.parse_response(out)[0]
        except (EOFError, ValueError, IndexError):
            problems.append("%s (%s): no answer %r" % (name, addr, out[:120]))
            continue
        ps = r.header("Proxy-Status") or ""
        if dns.counts.get(name, 0) <= before:
            problems.append("%s: the DNS server saw no query" % name)
        if name in REFUSED and not (r.status == 403 and "destination_ip_prohibited" in ps):
            problems.append("%s -> %s: %d %r, wanted 403 destination_ip_prohibited (not "
                            "globally reachable)" % (name, addr, r.status, ps))
        if name in REACHABLE and r.status != 502:
            problems.append("%s -> %s: %d %r, wanted 502 from a dial that finds no route "
                            "(globally reachable)" % (name, addr, r.status, ps))
finally:
    rc = vg.stop()
    dns.stop()
if problems:
    t.fail("\n  ".join(["special-purpose blocks:"] + problems))
t.check(rc == 0, "exit %s" % rc)
blocked = sorted(x["host"] for x in t.audit_rows(vg, "blocked"))
t.check(blocked == sorted(REFUSED), "blocked_host_log hosts %r, wanted %r" %
        (blocked, sorted(REFUSED)))
routes = sorted((x["host"], x["route"]) for x in t.audit_rows(vg, "routes")
                if x["route"] == "refused")
t.check(routes == [(n, "refused") for n in sorted(REFUSED)], "refused routes %r" % routes)
