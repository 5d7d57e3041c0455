#!/usr/bin/env python3
"""vaultgate never dials an address of the machine it runs on (SPEC §4: "an address of the
machine vaultgate runs on (any local interface, not only its listeners)"), unless --allow-private
or --resolve covers it, like other prohibited addresses.

In a network namespace of its own the case gives an interface (one end of a veth pair) public
addresses: 11.0.0.2 and 2a02:ffff:ffff::2 before vaultgate starts, 11.0.0.3 after it started
(the set must follow changes), and 11.0.0.4, which --allow-private 11.0.0.4/32 exempts.
vaultgate listens on 127.0.0.1 only; a loopback DNS server answers each name with one of these
addresses, and a witness listens on each of them (ports 80 and 443). Then:
- names resolving to 11.0.0.2, 2a02:ffff:ffff::2 and 11.0.0.3, over the plain-HTTP listener
  (port 80) and the TLS listener (a rule host, port 443), get 403 `destination_ip_prohibited`,
  recorded in blocked_host_log, and no witness sees a connection;
- 11.0.0.4 (allow-listed) and a name pinned with --resolve to 11.0.0.2 are dialled: their
  witness sees connections (it closes them, so the answer is a 502 after vaultgate's one retry);
- once 11.0.0.3 is removed again, it is an ordinary public address: dialled, and with no route
  in the namespace the answer is a 502.

Why this can fail: a vaultgate that knew only its listener addresses dialled the machine's own
public addresses (the witnesses saw connections; the answers were 502), and one that read the
interfaces once at start missed 11.0.0.3."""
import subprocess
import vgtest as t
from dnsserver import DnsServer

if not t.isolate_net():
    t.skip("needs a network namespace of its own (it adds addresses to an interface)")
t.require_binary()


def ip(*args):
    p = subprocess.run(["ip"] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t.check(p.returncode == 0, "ip %s: %s" % (" ".join(args), p.stderr.decode(errors="replace")))


ip("link", "add", "vgown0", "type", "veth", "peer", "name", "vgown1")
ip("link", "set", "vgown0", "up")
ip("link", "set", "vgown1", "up")
ip("addr", "add", "11.0.0.2/32", "dev", "vgown0")
ip("addr", "add", "11.0.0.4/32", "dev", "vgown0")
ip("-6", "addr", "add", "2a02:ffff:ffff::2/128", "dev", "vgown0", "nodad")
d = t.tmpdir()
certs = t.make_certs(d, ["own1.example.test"])
ZONE = {"own1.example.test": ["11.0.0.2"], "own4.example.test": ["11.0.0.2"],
        "own6.example.test": ["2a02:ffff:ffff::2"],
        "late.example.test": ["11.0.0.3"], "exempt.example.test": ["11.0.0.4"]}
dns = DnsServer(ZONE).start()
witnesses = {(a, p): t.Witness(a, p) for a in ("11.0.0.2", "2a02:ffff:ffff::2", "11.0.0.4")
             for p in (80, 443)}
vault = t.example_vault(rules=[{"host_pattern": "own1.example.test", "secret": "API_KEY",
                                "scheme": "bearer"}])
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"], http=True, audit="sqlite",
                 pins=["pinned.example.test:80:11.0.0.2"],
                 extra=["--dns-server", dns.server, "--allow-private", "11.0.0.4/32"]).start()
problems = []


def plain(name):
    out = vg.http_exchange(b"GET /x HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
                           name.encode())
    return t.parse_response(out)[0]


def expect(what, r, status, error=None):
    ps = r.header("Proxy-Status") or ""
    if r.status != status or (error and "error=" + error not in ps):
        problems.append("%s: %d %r, wanted %d %s" % (what, r.status, ps, status, error or ""))


def accepts():
    return {k: w.accepts for k, w in witnesses.items()}


try:
    for name in ("own4.example.test", "own6.example.test"):
        expect("%s (plain HTTP, %s port 80)" % (name, ZONE[name][0]), plain(name), 403,
               "destination_ip_prohibited")
    r = vg.request("own1.example.test", b"GET /x HTTP/1.1\r\nHost: own1.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    expect("own1.example.test (TLS rule host, 11.0.0.2:443)", r, 403, "destination_ip_prohibited")
    # an address that appears after start
    ip("addr", "add", "11.0.0.3/32", "dev", "vgown0")
    late = [t.Witness("11.0.0.3", 80)]
    expect("late.example.test (11.0.0.3, added after start)", plain("late.example.test"), 403,
           "destination_ip_prohibited")
    if late[0].accepts:
        problems.append("11.0.0.3:80, added after start, was dialled")
    late[0].stop()
    ip("addr", "del", "11.0.0.3/32", "dev", "vgown0")
    expect("late.example.test (11.0.0.3, removed again: no route)", plain("late.example.test"),
           502)
    seen = accepts()
    if any(seen.values()):
        problems.append("an address of the machine was dialled: %r" % seen)
    # exemptions: allow-listed, and pinned
    expect("exempt.example.test (11.0.0.4, --allow-private)", plain("exempt.example.test"), 502)
    expect("pinned.example.test (--resolve to 11.0.0.2)", plain("pinned.example.test"), 502)
    t.wait_for(lambda: witnesses[("11.0.0.4", 80)].accepts and
               witnesses[("11.0.0.2", 80)].accepts, timeout=30)
    seen = accepts()
    dialled = {k for k, n in seen.items() if n}
    if dialled != {("11.0.0.4", 80), ("11.0.0.2", 80)}:
        problems.append("witness connections %r, wanted some for the exempt and the pinned "
                        "address (port 80) only" % seen)
finally:
    rc = vg.stop()
    dns.stop()
    for w in witnesses.values():
        w.stop()
if problems:
    t.fail("\n  ".join(["addresses of the machine:"] + problems))
t.check(rc == 0, "exit %s" % rc)
blocked = sorted(x["host"] for x in t.audit_rows(vg, "blocked"))
t.check(blocked == ["late.example.test", "own1.example.test", "own4.example.test",
                   "own6.example.test"],
        "blocked_host_log hosts %r" % blocked)
