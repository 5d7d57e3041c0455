#!/usr/bin/env python3
"""Catch-all and IPv6 (SPEC §12, `vaultgate nft`): the sandbox has IPv6 beside IPv4, and
vaultgate listens on [::] too.
- Sandbox ruleset without --proxy-ip6: IPv6 output is refused at once - a TCP connect gets a
  reset (ECONNREFUSED), UDP an error - never a timeout, and is counted; curl given an IPv6 and
  an IPv4 address for a host falls back to IPv4 and is served.
- With --proxy-ip6: IPv6 TCP 443 to any address reaches vaultgate and the rule host is injected.
- Gateway ruleset: IPv6 TCP 443 is redirected like IPv4 (injected), IPv6 UDP refused.
Addresses exist only in the namespaces this case creates."""
import json
import subprocess
import sys

import catchall
import netns
import vgtest as t

t.require_binary()
try:
    topo = netns.Topology()
    topo.add_ipv6()
except (netns.Unavailable, subprocess.CalledProcessError) as e:
    t.skip(str(e))

SECRET = "sk-canary-SECRET-ipv6-0021"
OTHER6 = "2001:db8::77"  # a documentation address: routed to the gateway's dead end, never out

# Connects (TCP or UDP) to [addr]:port and prints the errno name, "connected" or "timeout".
CONNECT = r'''
import errno, socket, sys
addr, port, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET6, socket.SOCK_STREAM if kind == "tcp" else socket.SOCK_DGRAM)
s.settimeout(5)
try:
    s.connect((addr, port))
    if kind == "udp":
        s.send(b"x")
        s.recv(100)
    print("connected")
except socket.timeout:
    print("timeout")
except OSError as e:
    print(errno.errorcode.get(e.errno, str(e.errno)))
'''
REFUSED = ("ECONNREFUSED", "ENETUNREACH", "EACCES", "EPERM", "EHOSTUNREACH")


def attempt(addr, port, kind):
    r = topo.sb(sys.executable, "-c", CONNECT, addr, str(port), kind, check=False, timeout=30)
    return r.stdout.decode().strip()


def counter(name, ns_run):
    r = ns_run("nft", "-j", "list", "counter", "inet", "vaultgate", name)
    return [o["counter"]["packets"] for o in json.loads(r.stdout)["nftables"] if "counter" in o][0]


def curl(resolve, path, extra=()):
    args = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{remote_ip}", "--max-time",
            "10", "--cacert", vg.ca, "--resolve", "api.example.test:443:" + resolve,
            "https://api.example.test" + path, "-H", "Authorization: Bearer placeholder"]
    r = topo.sb(*(args + list(extra)), check=False)
    return r.stdout.decode(), r.stderr.decode()


try:
    up, vg = catchall.start_gateway(topo, "run-ipv6-1", SECRET,
                                    extra=["--listen-https", "[::]:8443",
                                           "--listen-http", "[::]:8080"])

    # 1. The sandbox's ruleset with an IPv4 proxy address only: IPv6 is refused at once.
    r = topo.sb(t.VG_BIN, "nft", "--vault", vg.vault_path, "--where", "sandbox", "--proxy-ip",
                netns.GATEWAY_ADDR, "--apply", check=False)
    t.check(r.returncode == 0, "sandbox nft --apply: %s" % r.stderr.decode())
    for addr, port, kind in ((OTHER6, 443, "tcp"), (OTHER6, 22, "tcp"),
                             (netns.GATEWAY_ADDR6, 8443, "tcp"), (OTHER6, 443, "udp")):
        what = attempt(addr, port, kind)
        t.check(what in REFUSED, "sandbox without --proxy-ip6: %s [%s]:%d gave %s, want an "
                "error at once" % (kind, addr, port, what))
    n = counter("rejected_ipv6", topo.sb)
    t.check(n >= 3, "rejected_ipv6 counts %d, want 3" % n)
    code, err = curl("[%s],192.0.2.77" % OTHER6, "/v1/fallback")
    t.check(code == "200 192.0.2.77", "curl with an IPv6 and an IPv4 address: %r %s"
            % (code, err))

    # 2. With --proxy-ip6, IPv6 TCP 443 to any address reaches vaultgate.
    r = topo.sb(t.VG_BIN, "nft", "--vault", vg.vault_path, "--where", "sandbox", "--proxy-ip",
                netns.GATEWAY_ADDR, "--proxy-ip6", netns.GATEWAY_ADDR6, "--apply", check=False)
    t.check(r.returncode == 0, "sandbox nft --proxy-ip6 --apply: %s" % r.stderr.decode())
    code, err = curl("[%s]" % OTHER6, "/v1/sandbox6")
    t.check(code == "200 %s" % OTHER6, "IPv6 through the sandbox DNAT: %r %s" % (code, err))
    got = up.all_bytes()
    t.check(b"GET /v1/sandbox6" in got and ("Authorization: Bearer " + SECRET).encode() in got,
            "the upstream did not get the IPv6 request injected")
    topo.sb("nft", "delete", "table", "inet", "vaultgate")

    # 3. The gateway's ruleset redirects IPv6 TCP 443 as it does IPv4, and refuses IPv6 UDP.
    r = subprocess.run([t.VG_BIN, "nft", "--vault", vg.vault_path, "--sandbox-if", topo.gw_if,
                        "--apply"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t.check(r.returncode == 0, "gateway nft --apply: %s" % r.stderr.decode())
    code, err = curl("[%s]" % OTHER6, "/v1/gateway6")
    t.check(code == "200 %s" % OTHER6, "IPv6 through the gateway redirect: %r %s" % (code, err))
    t.check(b"GET /v1/gateway6" in up.all_bytes(), "the upstream did not get the request")
    what = attempt(OTHER6, 443, "udp")
    t.check(what in REFUSED, "gateway: IPv6 UDP 443 gave %s, want an error at once" % what)
    t.check(counter("rejected_udp", topo.gw) >= 1, "gateway rejected_udp did not count")
    vg.stop()
    t.check(SECRET not in vg.stderr(), "the secret appeared in the log")
finally:
    topo.close()
t.log("IPv6: refused at once without --proxy-ip6, redirected with it and through the gateway")
