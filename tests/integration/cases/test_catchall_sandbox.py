#!/usr/bin/env python3
"""Catch-all with the sandbox-local ruleset (SPEC §9, `vaultgate nft --where sandbox`).

vaultgate runs in the gateway namespace on 0.0.0.0:8443/8080 with no ruleset there; the
sandbox's own namespace gets the ruleset, which DNATs its TCP 80/443 to the gateway's address,
refuses UDP and drops all other output except loopback. From the sandbox: a rule host at an
arbitrary address is injected; unlisted hosts get a readable 403 over TLS and plain HTTP and a
blocked_host_log row; TCP 22 is dropped and UDP refused (each send fails at once), each counted
in the sandbox's table; the probe passes, and fails once the sandbox's table is deleted."""
import json
import subprocess
import sys

import catchall
import netns
import vgtest as t

t.require_binary()
try:
    topo = netns.Topology()
except netns.Unavailable as e:
    t.skip(str(e))

SECRET = "sk-canary-SECRET-sandbox-0011"
try:
    up, vg = catchall.start_gateway(topo, "run-sandbox-1", SECRET, audit="sqlite")

    r = topo.sb(t.VG_BIN, "nft", "--vault", vg.vault_path, "--where", "sandbox", "--proxy-ip",
                netns.GATEWAY_ADDR, "--https-port", "8443", "--http-port", "8080", "--apply",
                check=False)
    t.check(r.returncode == 0, "nft --where sandbox --apply failed: %s" % r.stderr.decode())

    r = topo.sb("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "10",
                "--cacert", vg.ca, "--resolve", "api.example.test:443:192.0.2.90",
                "https://api.example.test/v1/y", "-H", "Authorization: Bearer placeholder",
                check=False)
    t.check(r.stdout == b"200", "rule host through the sandbox DNAT: %r %s"
            % (r.stdout, r.stderr.decode()))
    t.check(("Authorization: Bearer " + SECRET).encode() in up.all_bytes(),
            "upstream did not receive the injected secret")

    # An unlisted host under the block default: a readable 403, over TLS and over plain HTTP.
    for url, hostport in (("https://unlisted.example.test/", "unlisted.example.test:443"),
                          ("http://plain.example.test/", "plain.example.test:80")):
        r = topo.sb("curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "10",
                    "--cacert", vg.ca, "--resolve", hostport + ":192.0.2.93", url, check=False)
        out = r.stdout.decode("utf-8", "replace")
        t.check(out.endswith("\n403") and hostport.split(":")[0] in out,
                "%s through the sandbox DNAT: %r %s" % (url, out, r.stderr.decode()))

    r = topo.sb(sys.executable, "-c", "import socket; socket.create_connection(('192.0.2.91', 22),"
                " timeout=2)", check=False)
    t.check(r.returncode != 0, "TCP 22 from the sandbox connected")
    r = topo.sb(sys.executable, "-c", "import socket; socket.create_connection(('%s', 9090),"
                " timeout=2)" % netns.GATEWAY_ADDR, check=False)
    t.check(r.returncode != 0, "the sandbox reached another port on the gateway")
    # each send fails at once (EPERM: the output hook refused it)
    r = topo.sb(sys.executable, "-c", "import socket\ns=socket.socket(socket.AF_INET, "
                "socket.SOCK_DGRAM)\nfor _ in range(3):\n  try: s.sendto(b'x', ('192.0.2.92', "
                "9999)); print('sent')\n  except OSError as e: print(e.errno)", check=False)
    t.check(r.stdout.split() == [b"1"] * 3, "UDP from the sandbox: %r" % r.stdout)
    for name, least in (("dropped_output", 2), ("rejected_udp", 3)):
        r = topo.sb("nft", "-j", "list", "counter", "inet", "vaultgate", name)
        pk = [o["counter"]["packets"] for o in json.loads(r.stdout)["nftables"] if "counter" in o]
        t.check(pk and pk[0] >= least, "%s counter: %r" % (name, pk))

    r = topo.sb(t.VG_BIN, "probe", "--timeout", "3", check=False)
    t.check(r.returncode == 0, "probe failed with the ruleset: %s" % r.stderr.decode())
    # Applying again replaces the table (idempotent), and the probe still passes.
    r = topo.sb(t.VG_BIN, "nft", "--vault", vg.vault_path, "--where", "sandbox", "--proxy-ip",
                netns.GATEWAY_ADDR, "--apply", check=False)
    t.check(r.returncode == 0, "re-applying failed: %s" % r.stderr.decode())
    r = topo.sb("nft", "list", "tables")
    t.check(r.stdout.decode().count("vaultgate") == 1, "tables after re-apply: %r" % r.stdout)

    topo.sb("nft", "delete", "table", "inet", "vaultgate")
    r = topo.sb(t.VG_BIN, "probe", "--timeout", "2", check=False)
    t.check(r.returncode != 0, "probe passed without the ruleset")
    vg.stop()
    t.check(SECRET not in vg.stderr(), "the secret appeared in the log")
    rows = t.audit_rows(vg, "blocked", run_id="run-sandbox-1")
    hosts = {r["host"]: r["seen_count"] for r in rows}
    t.check(hosts.get("unlisted.example.test") == 1 and hosts.get("plain.example.test") == 1,
            "blocked_host_log: %r" % rows)
finally:
    topo.close()
