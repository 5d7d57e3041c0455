#!/usr/bin/env python3
"""Catch-all refuses UDP at once (SPEC §12, `vaultgate nft`): a UDP packet to port 443 - a QUIC
client's first flight - from the sandbox gets an ICMP administratively-prohibited answer instead
of silence, so the client's next call fails with an error rather than waiting for a timeout,
and it falls back to TCP. Both rulesets: the gateway's (forwarded, and to the gateway itself)
and the sandbox's own (output), each counting the refusals in rejected_udp. How long the error
took is logged, not asserted. (Debian 12's curl has no HTTP/3, so a Python socket stands in for
the QUIC client.)"""
import json
import subprocess
import sys

import netns
import vgtest as t

t.require_binary()
try:
    topo = netns.Topology()
except netns.Unavailable as e:
    t.skip(str(e))

# A connected UDP socket sends one datagram and waits for the answer; prints the errno (or
# "timeout") and the milliseconds it took. An error may come at the send (the sandbox's own
# output hook refuses it: EPERM) or at the recv (the ICMP answer: EHOSTUNREACH for ICMP,
# EACCES for ICMPv6, ECONNREFUSED for a port unreachable).
QUIC = r'''
import errno, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.connect((sys.argv[1], 443))
t0 = time.monotonic()
try:
    s.send(b"\xc0\x00\x00\x00\x01" + bytes(1195))
    s.recv(2048)
    what = "answered"
except socket.timeout:
    what = "timeout"
except OSError as e:
    what = errno.errorcode.get(e.errno, str(e.errno))
print(what, "%.2f" % ((time.monotonic() - t0) * 1000))
'''
REFUSED = ("EHOSTUNREACH", "ECONNREFUSED", "EACCES", "EPERM")


def udp443(addr):
    r = topo.sb(sys.executable, "-c", QUIC, addr, check=False, timeout=30)
    t.check(r.returncode == 0, "UDP client failed: %s" % r.stderr.decode())
    what, ms = r.stdout.decode().split()
    return what, float(ms)


def counter(name, ns_run):
    r = ns_run("nft", "-j", "list", "counter", "inet", "vaultgate", name)
    return [o["counter"]["packets"] for o in json.loads(r.stdout)["nftables"] if "counter" in o][0]


try:
    vault = t.tmpdir() + "/v.json"
    with open(vault, "w") as f:
        json.dump(t.example_vault(run_id="run-udp-1", default="block"), f)

    # The gateway's ruleset: forwarded UDP, and UDP to the gateway's own address.
    r = topo.gw(t.VG_BIN, "nft", "--vault", vault, "--sandbox-if", topo.gw_if,
                "--apply", check=False)
    t.check(r.returncode == 0, "gateway nft --apply: %s" % r.stderr.decode())
    times = []
    for addr in ("192.0.2.44", "198.51.100.44", netns.GATEWAY_ADDR):
        what, ms = udp443(addr)
        t.check(what in REFUSED, "gateway: UDP 443 to %s: %s after %.1f ms, want an ICMP error"
                % (addr, what, ms))
        times.append(ms)
    n = counter("rejected_udp", topo.gw)
    t.check(n >= 3, "gateway rejected_udp counts %d, want 3" % n)
    t.log("gateway: UDP 443 refused in %s ms (%s)" % (", ".join("%.2f" % x for x in times), what))
    topo.gw("nft", "delete", "table", "inet", "vaultgate")

    # The sandbox's own ruleset.
    r = topo.sb(t.VG_BIN, "nft", "--vault", vault, "--where", "sandbox", "--proxy-ip",
                netns.GATEWAY_ADDR, "--apply", check=False)
    t.check(r.returncode == 0, "sandbox nft --apply: %s" % r.stderr.decode())
    times = []
    for addr in ("192.0.2.45", netns.GATEWAY_ADDR):
        what, ms = udp443(addr)
        t.check(what in REFUSED, "sandbox: UDP 443 to %s: %s after %.1f ms, want an error"
                % (addr, what, ms))
        times.append(ms)
    n = counter("rejected_udp", topo.sb)
    t.check(n >= 2, "sandbox rejected_udp counts %d, want 2" % n)
    t.log("sandbox: UDP 443 refused in %s ms (%s)" % (", ".join("%.2f" % x for x in times), what))
finally:
    topo.close()
