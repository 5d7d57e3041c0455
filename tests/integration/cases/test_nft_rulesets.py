#!/usr/bin/env python3
"""`vaultgate nft`: every ruleset it prints is one the real nft accepts (`nft -c -f -`, in a
network namespace of this case's own, so nothing is installed anywhere): each --where with each
DNS choice (none, --dns IPv4 or IPv6, --dns-redirect), with and without --sandbox-if, and for the
sandbox an IPv4, IPv6, or IPv4 plus --proxy-ip6 proxy address, each also with --exempt-uid (by
number and by name) and the sidecar's loopback proxy address. Then the applied ruleset is
listed back, and its counters are the ones docs/gateway.md names."""
import itertools
import json
import os
import shutil
import subprocess

import vgtest as t

t.require_binary()
if os.geteuid() != 0 or shutil.which("nft") is None or shutil.which("unshare") is None:
    t.skip("needs root, nft and unshare")
d = t.tmpdir()
vault = os.path.join(d, "v.json")
with open(vault, "w") as f:
    json.dump(t.example_vault(run_id="run-nft-rules", default="block"), f)

dns_choices = ([], ["--dns", "10.9.9.53"], ["--dns", "fd00:9::53"], ["--dns-redirect", "5353"],
               ["--dns-redirect", "53"])
combos = []
for dns, ifname in itertools.product(dns_choices, ([], ["--sandbox-if", "vsb0"])):
    combos.append(["--where", "gateway"] + ifname + dns)
for dns, proxy in itertools.product(dns_choices, (["--proxy-ip", "10.9.9.1"],
                                                  ["--proxy-ip", "fd00:9::1"],
                                                  ["--proxy-ip", "10.9.9.1", "--proxy-ip6",
                                                   "fd00:9::1"])):
    combos.append(["--where", "sandbox"] + proxy + dns + ["--https-port", "9443"])
    combos.append(["--where", "sandbox"] + proxy + dns + ["--exempt-uid", "65532"])
for dns, exempt in itertools.product(dns_choices, ("0", "nobody", "4294967294")):
    combos.append(["--where", "sandbox", "--proxy-ip", "127.0.0.1", "--https-port", "443",
                   "--http-port", "80", "--exempt-uid", exempt] + dns)

checked = 0
for args in combos:
    p = subprocess.run([t.VG_BIN, "nft", "--vault", vault] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    t.check(p.returncode == 0, "%s: rc=%d %s" % (args, p.returncode, p.stderr.decode()))
    c = subprocess.run(["unshare", "--net", "nft", "-c", "-f", "-"], input=p.stdout,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t.check(c.returncode == 0, "nft -c refuses the ruleset of %s: %s\n%s"
            % (args, c.stderr.decode(), p.stdout.decode()))
    checked += 1

# Applied (in a namespace of its own), the tables list the counters the docs name.
want = {"gateway": {"dropped_input", "dropped_forward", "rejected_udp"},
        "sandbox": {"dropped_output", "rejected_udp", "rejected_ipv6"}}
for where, extra in (("gateway", ["--dns-redirect", "5353"]),
                     ("sandbox", ["--proxy-ip", "10.9.9.1", "--dns-redirect", "5353"])):
    script = ('"$1" nft --vault "$2" --where "$3" %s --apply >/dev/null 2>&1 && '
              'nft -j list counters table inet vaultgate' % " ".join(extra))
    p = subprocess.run(["unshare", "--net", "sh", "-c", script, "sh", t.VG_BIN, vault, where],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t.check(p.returncode == 0, "%s: apply and list: %s" % (where, p.stderr.decode()))
    names = {o["counter"]["name"] for o in json.loads(p.stdout)["nftables"] if "counter" in o}
    t.check(names == want[where], "%s counters: %r" % (where, names))
t.log("nft -c accepted all %d rulesets" % checked)
