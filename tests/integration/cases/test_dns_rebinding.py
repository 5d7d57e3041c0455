#!/usr/bin/env python3
"""DNS rebinding (SPEC §4, "the address checked is the address dialled"): a name served by the
case's loopback DNS server (TTL 0, no --resolve pin) first answers 127.0.0.5, which
--allow-private 127.0.0.5/32 exempts and where the fake upstream listens, and from then on
127.0.0.6, which nothing exempts and where a witness listener counts connections.

- The first request is served from 127.0.0.5 with the secret, after exactly one A and one AAAA
  query: a vaultgate that checked one answer and resolved again to dial would have got 127.0.0.6
  (the DNS server answers it from the third query on) and the witness would see it.
- The next request on a new connection (the upstream closed the first one, so nothing is
  pooled) resolves again - TTL 0 may not be cached - and is refused 403
  `destination_ip_prohibited`; the witness sees nothing.
- When the name answers 127.0.0.5 again, the next request is served: the refusal left no state.

Why this can fail: without the check on every answer the second request reaches the witness;
with caching beyond the TTL it is served from 127.0.0.5 (status 200, no new DNS query)."""
import vgtest as t
from dnsserver import DnsServer

t.log("network namespace of its own: %s" % t.isolate_net())
t.require_binary()
SECRET = "sk-canary-SECRET-api-0001"
NAME = "rebind.example.test"
d = t.tmpdir()
certs = t.make_certs(d, [NAME])


def handler(req, ci):
    return [t.resp_bytes(200, b"from .5", [("Connection", "close")]), ("close",)]


try:
    up = t.FakeUpstream(certs["cert"], certs["key"], handler, addr="127.0.0.5")
    witness = t.Witness("127.0.0.6")
except OSError as e:
    t.skip("127.0.0.5/127.0.0.6:443 not bindable here: %s" % e)
dns = DnsServer(rebind={NAME: [["127.0.0.5"], ["127.0.0.5"], ["127.0.0.6"]]}).start()
vault = t.example_vault(rules=[{"host_pattern": NAME, "secret": "API_KEY", "scheme": "bearer"}])
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"],
                 extra=["--dns-server", dns.server, "--allow-private", "127.0.0.5/32"]).start()
REQ = (b"GET /r HTTP/1.1\r\nHost: " + NAME.encode() + b"\r\nAuthorization: Bearer placeholder"
       b"\r\nConnection: close\r\n\r\n")
try:
    r = vg.request(NAME, REQ)
    t.check(r.status == 200 and r.body == b"from .5", "first request (127.0.0.5): %r" % r)
    t.check(len(up.requests) == 1 and
            up.requests[0].header("Authorization") == ["Bearer " + SECRET], "not injected")
    t.check(dns.counts.get(NAME) == 2, "first request made %r DNS queries, wanted 2 (A, AAAA)" %
            dns.counts.get(NAME))
    t.check(witness.accepts == 0, "127.0.0.6 dialled for the first request")
    # the upstream closed its connection: wait until vaultgate saw that, so nothing is pooled
    t.time.sleep(0.2)
    for i in range(2):
        n = dns.counts.get(NAME)
        r = vg.request(NAME, REQ)
        ps = r.header("Proxy-Status") or ""
        t.check(r.status == 403 and "error=destination_ip_prohibited" in ps,
                "after rebinding to 127.0.0.6 (try %d): %d %r (%r)" % (i, r.status, ps, r.body))
        t.check(dns.counts.get(NAME) > n, "no new DNS query: a TTL-0 answer was cached")
        t.check(witness.accepts == 0, "127.0.0.6 was dialled")
        t.check(len(up.requests) == 1, "a rebinding request was served by 127.0.0.5")
    dns.rebind[NAME] = [["127.0.0.5"]]
    r = vg.request(NAME, REQ)
    t.check(r.status == 200 and len(up.requests) == 2, "back on 127.0.0.5: %r" % r)
finally:
    rc = vg.stop()
    up.stop()
    witness.stop()
    dns.stop()
t.check(rc == 0, "exit %s" % rc)
t.check(SECRET not in vg.stderr(), "secret in the log")
