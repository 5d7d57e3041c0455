#!/usr/bin/env python3
"""DNS held by the gateway, with the sandbox ruleset (SPEC §12, `vaultgate nft --where sandbox
--dns-redirect`): vaultgate answers DNS itself (`run --listen-dns 0.0.0.0:5353`) in the gateway
namespace, and a decoy resolver there listens on every address the sandbox names (two
documentation addresses and the host's own resolver address, each only on the gateway's
loopback). Once the ruleset is in place, from the sandbox: dig at each address, over UDP and
TCP, is answered by vaultgate; Python's getaddrinfo through a resolv.conf naming an arbitrary
address resolves through vaultgate; names resolved so are fetched by curl on 443 - the rule host
injected, the allowed host forwarded, the blocked host a 403; `vaultgate probe --dns` passes;
the decoy saw nothing (it answered the sandbox before the ruleset, so that means something)."""
import shutil
import subprocess

import catchall
import catchdns
import netns
import vgtest as t

t.require_binary()
if not shutil.which("dig"):
    t.skip("dig missing (Debian bind9-dnsutils; scripts/deps installs it)")
try:
    topo = netns.Topology()
except netns.Unavailable as e:
    t.skip(str(e))

SECRET = "sk-canary-SECRET-dns-sandbox-0031"
try:
    up, vg = catchall.start_gateway(topo, "run-dns-sandbox", SECRET, audit="sqlite",
                                    allowed=[catchdns.ALLOWED],
                                    extra=["--listen-dns", "0.0.0.0:%d" % catchdns.DNS_PORT])
    addrs = catchdns.resolver_addrs()
    decoy = catchdns.start_decoy(topo, addrs)

    r = topo.sb(t.VG_BIN, "nft", "--vault", vg.vault_path, "--where", "sandbox", "--proxy-ip",
                netns.GATEWAY_ADDR, "--dns-redirect", str(catchdns.DNS_PORT), "--apply",
                check=False)
    t.check(r.returncode == 0, "nft --apply: %s" % r.stderr.decode())
    catchdns.check_dns_held(topo, vg, up, decoy, SECRET, addrs)
    vg.stop()
    hosts = {r["host"] for r in t.audit_rows(vg, "blocked", run_id="run-dns-sandbox")}
    t.check(hosts == {catchdns.BLOCKED}, "blocked_host_log: %r" % hosts)
finally:
    topo.close()
t.log("sandbox --dns-redirect: dig, getaddrinfo and curl answered by vaultgate; the decoy saw "
      "nothing")
