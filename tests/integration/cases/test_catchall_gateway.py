#!/usr/bin/env python3
"""Catch-all through a gateway namespace (SPEC §9, `vaultgate nft --where gateway`).

A sandbox namespace whose only route is a gateway namespace; in the gateway, vaultgate listens on
0.0.0.0:8443/8080, a fake upstream answers for the rule host (reached through --resolve), and the
ruleset from `vaultgate nft --apply` redirects the sandbox's 80/443. From the sandbox:
- TLS to an arbitrary address with SNI of a rule host gets the injected request upstream;
- SNI of an unlisted host under a block default gets a readable 403 (the CA is unconstrained)
  and a blocked_host_log row; plain HTTP on 80 likewise;
- TCP 22 and UDP other than DNS do not leave (dropped and refused, and counted);
- TLS without SNI is refused and recorded under the original destination address;
- `vaultgate probe` passes, and fails once the ruleset is deleted.
The addresses exist only inside the namespaces this case creates; the gateway's uplink is a
veth pair that leads nowhere."""
import json
import os
import socket
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

SECRET = "sk-canary-SECRET-catchall-0007"
try:
    # Everything this process starts from here on lives in the gateway namespace.
    up, vg = catchall.start_gateway(topo, "run-catchall-1", SECRET, audit="sqlite")

    p = subprocess.run([t.VG_BIN, "nft", "--vault", vg.vault_path, "--where", "gateway",
                        "--sandbox-if", topo.gw_if, "--https-port", "8443", "--http-port",
                        "8080", "--apply"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t.check(p.returncode == 0, "nft --apply failed: %s" % p.stderr.decode())

    def sandbox_curl(url, host, addr, port, extra=()):
        args = ["curl", "-sS", "-o", "-", "-w", "\n%{http_code}", "--max-time", "10",
                "--cacert", vg.ca, "--resolve", "%s:%d:%s" % (host, port, addr), url]
        r = topo.sb(*(args + list(extra)), check=False)
        out = r.stdout.decode("utf-8", "replace")
        body, _, code = out.rpartition("\n")
        return r.returncode, code, body, r.stderr.decode("utf-8", "replace")

    # 1. A rule host, dialled at an arbitrary address: intercepted and injected.
    rc, code, body, err = sandbox_curl("https://api.example.test/v1/x", "api.example.test",
                                       "192.0.2.77", 443, ["-H", "Authorization: Bearer placeholder"])
    t.check(rc == 0 and code == "200", "rule host through the redirect: rc=%d code=%s %s"
            % (rc, code, err))
    got = up.all_bytes()
    t.check(("Authorization: Bearer " + SECRET).encode() in got,
            "upstream did not receive the injected secret")
    t.check(b"placeholder" not in got, "the placeholder reached the upstream")
    t.check(SECRET not in body, "the secret was reflected to the sandbox")

    # 2. An unlisted host under a block default: a readable 403 over verified TLS.
    rc, code, body, err = sandbox_curl("https://unlisted.example.test/", "unlisted.example.test",
                                       "192.0.2.78", 443)
    t.check(rc == 0 and code == "403", "unlisted TLS host: rc=%d code=%s %s" % (rc, code, err))
    t.check("unlisted.example.test" in body, "403 body does not name the host: %r" % body)

    # 3. Plain HTTP on 80 likewise.
    rc, code, body, err = sandbox_curl("http://plain.example.test/", "plain.example.test",
                                       "192.0.2.79", 80)
    t.check(rc == 0 and code == "403", "unlisted plain host: rc=%d code=%s %s" % (rc, code, err))

    # 4. TCP 22 and UDP 9999 do not leave; the TCP is dropped, the UDP refused (ICMP), and
    #    both are counted.
    r = topo.sb(sys.executable, "-c", "import socket; socket.create_connection(('192.0.2.80', 22),"
                " timeout=2)", check=False)
    t.check(r.returncode != 0, "TCP 22 from the sandbox connected")
    topo.sb(sys.executable, "-c", "import socket; s=socket.socket(socket.AF_INET, "
            "socket.SOCK_DGRAM); [s.sendto(b'x', ('192.0.2.81', 9999)) for _ in range(3)]")

    def packets(name):
        r = subprocess.run(["nft", "-j", "list", "counter", "inet", "vaultgate", name],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        return [o["counter"]["packets"] for o in json.loads(r.stdout)["nftables"]
                if "counter" in o]
    pk = packets("dropped_forward")
    t.check(pk and pk[0] >= 1, "dropped_forward counter: %r" % pk)
    pk = packets("rejected_udp")
    t.check(pk and pk[0] >= 3, "rejected_udp counter: %r" % pk)

    # 5. TLS without SNI: refused, and recorded under the address the sandbox dialled
    #    (SO_ORIGINAL_DST), which is never dialled by vaultgate.
    r = topo.sb("openssl", "s_client", "-connect", "192.0.2.83:443", "-noservername",
                stdin=subprocess.DEVNULL, check=False, timeout=15)
    t.check(b"unrecognized name" in r.stdout + r.stderr or r.returncode != 0,
            "a TLS connection without SNI was accepted")

    # 6. The probe passes while the ruleset is in place ...
    r = topo.sb(t.VG_BIN, "probe", "--timeout", "3", "--ca", vg.ca, check=False)
    t.check(r.returncode == 0, "probe failed with the ruleset: %s" % r.stderr.decode())

    # Audit: the two refusals are rows of blocked_host_log, the rule host a direct route.
    vg.stop()
    rows = json.loads(subprocess.run([t.VG_BIN, "audit", "--store",
                                      "sqlite:" + os.path.join(vg.state, "audit.db"), "blocked",
                                      "--json"], stdout=subprocess.PIPE).stdout)
    hosts = {r["host"]: r for r in rows}
    for h in ("unlisted.example.test", "plain.example.test", "192.0.2.83"):
        t.check(h in hosts and hosts[h]["seen_count"] == 1 and hosts[h]["source"] == "proxy",
                "blocked_host_log lacks %s: %r" % (h, rows))
    t.check(SECRET not in vg.stderr(), "the secret appeared in the log")
    t.check("/v1/x" not in vg.stderr(), "a path appeared in the log")

    # 7. ... and fails once it is gone.
    subprocess.run(["nft", "delete", "table", "inet", "vaultgate"], check=True)
    r = topo.sb(t.VG_BIN, "probe", "--timeout", "2", check=False)
    t.check(r.returncode != 0, "probe passed without the ruleset")
finally:
    topo.close()
t.log("catch-all gateway: injection, 403s, drops, probe — all as specified")
