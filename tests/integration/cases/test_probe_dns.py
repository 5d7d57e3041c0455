#!/usr/bin/env python3
"""`vaultgate probe --dns` (SPEC §12): besides (a) TLS to TARGET:443 reaching vaultgate and (b)
TCP to TARGET:22 failing, (c) probe.vaultgate.invalid TXT sent to TARGET:53 comes back with the
run id, and (d) a UDP datagram to TARGET:443 is refused at once; one line per check, exit 0 only
if all hold.

On a loopback address of a network namespace of its own:
- vaultgate with a TLS listener on :443 and a DNS listener on :53: exit 0, four `ok` lines, the
  run id in (c); nothing listens on UDP 443, so the kernel answers port unreachable: (d) holds;
- the same without the DNS listener: (c) fails, the others hold, exit 1;
- a UDP socket on :443 that swallows the datagram: (d) fails (no error came back), exit 1;
- a UDP socket on :443 that answers: (d) fails (UDP leaves), exit 1.

Why this can fail: before --dns existed the probe rejected the option (exit 2); a probe that
took "no answer" for "refused" would pass the swallowing case."""
import os
import socket
import subprocess
import threading

import vgtest as t

if not t.isolate_net():
    t.skip("needs a network namespace of its own (ports 53 and 443 on loopback)")
t.require_binary()
d = t.tmpdir()
ADDR = "127.0.0.44"


def probe(timeout="3"):
    p = subprocess.run([t.VG_BIN, "probe", "--dns", "--target", ADDR, "--timeout", timeout],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def lines(out, err):
    """{check letter: (ok?, line)} from the probe's output; one line per check."""
    got = {}
    for ok, text in ((True, out), (False, err)):
        for line in text.splitlines():
            t.check(line.startswith("vaultgate probe: ("), "unexpected line %r" % line)
            c = line[len("vaultgate probe: (")]
            t.check(c not in got, "check %s reported twice" % c)
            t.check((" ok: " in line) == ok and ((" FAIL: " in line) != ok), "line %r" % line)
            got[c] = (ok, line)
    t.check(sorted(got) == ["a", "b", "c", "d"], "checks reported: %r" % sorted(got))
    return got


def vaultgate(sub, dns):
    extra = ["--listen-https", "%s:443" % ADDR]
    if dns:
        extra += ["--listen-dns", "%s:53" % ADDR]
    return t.Vaultgate("%s/%s" % (d, sub), t.example_vault(run_id="run-probe-dns-3",
                                                           default="block"),
                       extra=extra).start()


class Udp443:
    """A UDP socket on ADDR:443 that swallows every datagram, or answers it."""

    def __init__(self, answer):
        self.s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.s.bind((ADDR, 443))
        self.s.settimeout(0.2)
        self.answer, self.stopping = answer, threading.Event()
        self.th = threading.Thread(target=self.loop, daemon=True)
        self.th.start()

    def loop(self):
        while not self.stopping.is_set():
            try:
                data, peer = self.s.recvfrom(2048)
            except socket.timeout:
                continue
            if self.answer:
                self.s.sendto(b"quic says hello", peer)

    def close(self):
        self.stopping.set()
        self.th.join()
        self.s.close()


for sub in ("both", "nodns", "swallow", "answer"):
    os.makedirs(os.path.join(d, sub))

vg = vaultgate("both", True)
try:
    rc, out, err = probe()
    got = lines(out, err)
    t.check(rc == 0 and all(ok for ok, _ in got.values()), "probe --dns: %d\n%s%s" % (rc, out, err))
    t.check("run run-probe-dns-3" in got["c"][1], "(c) does not name the run: %r" % got["c"][1])
    t.check("refused" in got["d"][1], "(d): %r" % got["d"][1])
    for sub, answer in (("swallow", False), ("answer", True)):
        s = Udp443(answer)
        try:
            rc, out, err = probe(timeout="2")
        finally:
            s.close()
        got = lines(out, err)
        t.check(rc == 1 and not got["d"][0] and all(got[c][0] for c in "abc"),
                "UDP 443 %s: %d\n%s%s" % (sub, rc, out, err))
        want = "no answer and no error" if not answer else "was answered"
        t.check(want in got["d"][1], "(d) with UDP 443 %s: %r" % (sub, got["d"][1]))
finally:
    vg.stop()

vg = vaultgate("nodns", False)
try:
    rc, out, err = probe()
    got = lines(out, err)
    t.check(rc == 1 and not got["c"][0] and all(got[c][0] for c in "abd"),
            "no DNS listener: %d\n%s%s" % (rc, out, err))
finally:
    vg.stop()
