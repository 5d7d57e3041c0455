#!/usr/bin/env python3
"""Mixed DNS answers (SPEC §4): a name whose answers are 127.0.0.6 (prohibited: loopback, not
covered by --allow-private 127.0.0.5/32), then 127.0.0.5 (exempt), plus AAAA ::ffff:127.0.0.6,
is served from 127.0.0.5 only - the prohibited answers, listed first, are dropped before
dialling, so the witness listening on 127.0.0.6:443 sees no connection. A name whose answers are
all prohibited gets 403 `destination_ip_prohibited`.

Why this can fail: a vaultgate that dialled the answers in order (or checked only the first, or
only the one it ended up using after a failed attempt) would reach the witness first."""
import vgtest as t
from dnsserver import DnsServer

t.log("network namespace of its own: %s" % t.isolate_net())
t.require_binary()
SECRET = "sk-canary-SECRET-api-0001"
NAMES = ["mixed.example.test", "allbad.example.test"]
d = t.tmpdir()
certs = t.make_certs(d, NAMES)
try:
    up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler, addr="127.0.0.5")
    witness = t.Witness("127.0.0.6")
except OSError as e:
    t.skip("127.0.0.5/127.0.0.6:443 not bindable here: %s" % e)
dns = DnsServer({"mixed.example.test": ["127.0.0.6", "127.0.0.5", "::ffff:127.0.0.6"],
                 "allbad.example.test": ["127.0.0.6", "::ffff:127.0.0.6"]}).start()
vault = t.example_vault(rules=[{"host_pattern": n, "secret": "API_KEY", "scheme": "bearer"}
                               for n in NAMES])
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"],
                 extra=["--dns-server", dns.server, "--allow-private", "127.0.0.5/32"]).start()
try:
    for i in range(3):
        r = vg.request("mixed.example.test", b"GET /m HTTP/1.1\r\nHost: mixed.example.test\r\n"
                       b"Connection: close\r\n\r\n")
        t.check(r.status == 200, "mixed answers, try %d: %r" % (i, r))
        t.check(up.requests[-1].header("Authorization") == ["Bearer " + SECRET], "not injected")
    t.check(witness.accepts == 0, "the prohibited answer 127.0.0.6 was dialled (%d)" %
            witness.accepts)
    r = vg.request("allbad.example.test", b"GET /m HTTP/1.1\r\nHost: allbad.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 403 and "destination_ip_prohibited" in (r.header("Proxy-Status") or ""),
            "all answers prohibited: %r" % r)
    t.check(dns.counts.get("allbad.example.test", 0) > 0, "no DNS query for allbad")
    t.check(witness.accepts == 0, "127.0.0.6 was dialled")
finally:
    rc = vg.stop()
    up.stop()
    witness.stop()
    dns.stop()
t.check(rc == 0, "exit %s" % rc)
