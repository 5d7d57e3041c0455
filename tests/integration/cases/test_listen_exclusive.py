#!/usr/bin/env python3
"""A listener address that something already listens on is exit 4 with one line, SO_REUSEPORT
or not (SPEC §8). The workers bind per-worker SO_REUSEPORT sockets, which would let a second
vaultgate of the same user join them and take a share of the new connections; it must not:
a second run on the same address (and on the wildcard address over it, and the reverse) exits
4 naming the address, and the first still serves every one of 50 new connections - its own CA
verifies every handshake - spread over both of its workers. Two of a run's own listeners on the same address are refused too.
A restart on the address right after a stop (server-side TIME_WAIT) still starts. Runs in its
own network namespace when it can (it listens on 0.0.0.0)."""
import os
import ssl
import subprocess
import time
import vgtest as t

t.isolate_net()
t.require_binary()
d = t.tmpdir()
BLOCKED = b"GET / HTTP/1.1\r\nHost: blocked.example.test\r\nConnection: close\r\n\r\n"


def start_second(sub, listen_https, *extra):
    """Starts another run on the given address (it is expected to exit 4 at once)."""
    vd = os.path.join(d, sub)
    os.makedirs(vd, exist_ok=True)
    args = [t.VG_BIN, "run", "--vault", os.path.join(d, "vault.json"),
            "--state-dir", os.path.join(vd, "var"), "--listen-https", listen_https,
            "--listen-http", "none", "--admin", "127.0.0.1:%d" % t.free_port(), "--audit",
            "off", "--threads", "2"] + list(extra)
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    t.wait_for(lambda: p.poll() is not None, timeout=60)
    return p


def end_second(p):
    """(exit code, stderr); a run still going is stopped and reported as such."""
    if p.poll() is None:
        p.kill()
        p.communicate()
        return None, "still running"
    return p.returncode, p.communicate()[1].decode()


def second(sub, listen_https, *extra):
    return end_second(start_second(sub, listen_https, *extra))


def refused_once(what, rc, err, label):
    t.check(rc == 4 and err.count("\n") == 1 and ("listener " + label) in err and
            "Address already in use" in err,
            "%s: exit %r, want 4 and one line naming %s: %r" % (what, rc, label, err))


def serves_all(vg, n=50):
    """n new connections, each verified with vg's own CA and answered by it."""
    for i in range(n):
        try:
            r = vg.request("blocked.example.test", BLOCKED)
        except (ssl.SSLError, OSError) as e:
            t.fail("connection %d of %d not served by the first run: %s" % (i + 1, n, e))
        t.check(r.status == 403, "connection %d: %r" % (i + 1, r))


vg = t.Vaultgate(d, t.example_vault(), threads=2)
os.chmod(vg.vault_path, 0o600)
vg.start()
port = vg.port
try:
    b = start_second("b", "127.0.0.1:%d" % port)
    serves_all(vg)  # while the second run lives, if it does
    rc, err = end_second(b)
    refused_once("same address", rc, err, "https 127.0.0.1:%d" % port)
    rc, err = second("c", "0.0.0.0:%d" % port)
    refused_once("wildcard over a specific address", rc, err, "https 0.0.0.0:%d" % port)
    serves_all(vg)
finally:
    rc = vg.stop()
t.check(rc == 0, "first run: exit %s" % rc)
# the claim socket joined the workers' SO_REUSEPORT group: both workers took connections
workers = {e["conn"] >> 48 for e in vg.events("request")}
t.check(workers == {0, 1}, "connections were not spread over both workers: %r" % workers)
t.log("a second run on the same address, or on 0.0.0.0 over it: exit 4; the first served "
      "100 of 100 new connections")

# The reverse overlap: the first run on the wildcard address, the second on a specific one.
wd = os.path.join(d, "wild")
os.makedirs(wd, exist_ok=True)
wport = t.free_port()
wvg = t.Vaultgate(wd, t.example_vault(), threads=2,
                  extra=["--listen-https", "0.0.0.0:%d" % wport])
wvg.start()
try:
    rc, err = second("d", "127.0.0.1:%d" % wport)
    refused_once("specific address under a wildcard", rc, err, "https 127.0.0.1:%d" % wport)
finally:
    t.check(wvg.stop() == 0, "wildcard run: exit code")

# Two of one run's own listeners on one address: refused, not silently mixed.
own = t.free_port()
rc, err = second("e", "127.0.0.1:%d" % own, "--listen-proxy", "127.0.0.1:%d" % own)
refused_once("own listeners on one address", rc, err, "proxy 127.0.0.1:%d" % own)

# A restart right after a stop: the server closed those connections first (TIME_WAIT on the
# listener's port), and SO_REUSEADDR still lets the next run in.
rd = os.path.join(d, "restart")
os.makedirs(rd, exist_ok=True)
again = t.Vaultgate(rd, t.example_vault(), threads=2, https_port=port)
t0 = time.monotonic()
again.start()
serves_all(again, 5)
t.check(again.stop() == 0, "restart: exit code")
t.log("wildcard under/over, own duplicate listeners refused; restart on the port at once "
      "(%.1f s)" % (time.monotonic() - t0))
