#!/usr/bin/env python3
"""The contrast of test_dns_prohibited.py: with --allow-private 127.0.0.0/8, a name whose DNS
answer (from the case's loopback DNS server, no --resolve pin) is a loopback address - or its
IPv4-mapped IPv6 form - IS dialled, and the request reaches the fake upstream there with the
secret injected. Proves that the witness method of test_dns_prohibited.py sees a dial when one
happens, and that --allow-private exempts exactly what it covers (a name answering a loopback
address outside a narrower --allow-private range is still refused)."""
import vgtest as t
from dnsserver import DnsServer

t.log("network namespace of its own: %s" % t.isolate_net())
t.require_binary()
SECRET = "sk-canary-SECRET-api-0001"
NAMES = ["loop.example.test", "mapped.example.test", "outside.example.test"]
d = t.tmpdir()
certs = t.make_certs(d, NAMES)
up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler,
                    addr="127.%d.%d.%d" % (t.random.randint(1, 254), t.random.randint(0, 255),
                                          t.random.randint(2, 254)))
witness = t.Witness("127.0.0.%d" % t.random.randint(2, 254))
dns = DnsServer({"loop.example.test": [up.addr], "mapped.example.test": ["::ffff:" + up.addr],
                 "outside.example.test": [witness.addr]}).start()
vault = t.example_vault(rules=[{"host_pattern": n, "secret": "API_KEY", "scheme": "bearer"}
                               for n in NAMES])


def get(vg, name):
    return vg.request(name, b"GET /ap HTTP/1.1\r\nHost: " + name.encode() +
                      b"\r\nAuthorization: Bearer placeholder\r\nConnection: close\r\n\r\n")


# 1. the whole loopback range allowed: both answers are dialled
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"],
                 extra=["--dns-server", dns.server, "--allow-private", "127.0.0.0/8"]).start()
try:
    for name in ("loop.example.test", "mapped.example.test"):
        n = len(up.requests)
        r = get(vg, name)
        t.check(r.status == 200, "%s (allowed by --allow-private 127.0.0.0/8): %r" % (name, r))
        t.check(len(up.requests) == n + 1 and
                up.requests[-1].header("Authorization") == ["Bearer " + SECRET] and
                up.requests[-1].header("Host") == [name], "%s: upstream got %r" %
                (name, up.requests[-1].raw_head if up.requests else None))
        t.check(SECRET.encode() not in r.raw_head + r.body, "%s: secret reflected" % name)
finally:
    rc = vg.stop()
t.check(rc == 0, "exit %s" % rc)

# 2. only the upstream's /16 allowed: the loopback answer outside it is refused, not dialled
d2 = t.os.path.join(d, "narrow")
t.os.mkdir(d2)
cidr = up.addr.rsplit(".", 2)[0] + ".0.0/16"  # 127.a.0.0/16, a >= 1: never the witness's
vg = t.Vaultgate(d2, vault, upstream_ca=certs["ca"],
                 extra=["--dns-server", dns.server, "--allow-private", cidr]).start()
try:
    r = get(vg, "loop.example.test")
    t.check(r.status == 200, "loop.example.test inside %s: %r" % (cidr, r))
    r = get(vg, "outside.example.test")
    t.check(r.status == 403 and "destination_ip_prohibited" in (r.header("Proxy-Status") or ""),
            "outside.example.test (%s, outside %s): %r" % (witness.addr, cidr, r))
    t.check(witness.accepts == 0, "a loopback answer outside --allow-private was dialled")
finally:
    rc = vg.stop()
    up.stop()
    dns.stop()
    witness.stop()
t.check(rc == 0, "exit %s" % rc)
t.check(SECRET not in vg.stderr(), "secret in the log")
