#!/usr/bin/env python3
"""Fail closed at start (SPEC §8): an invalid vault (3), an unreadable one - missing, a
directory - after --vault-wait (3, the wait observed, nothing listening while it lasts), a
listener in use (4), an audit store that cannot be opened (4), a non-loopback admin address (2):
each exits with one line on stderr, and afterwards nothing listens on any of the ports it was
given. A vault that appears during --vault-wait is loaded and the gateway starts."""
import json
import os
import socket
import subprocess
import threading
import time
import vgtest as t

t.require_binary()
d = t.tmpdir()
good = os.path.join(d, "good.json")
with open(good, "w") as f:
    json.dump(t.example_vault(), f)
os.chmod(good, 0o600)
bad = os.path.join(d, "bad.json")
with open(bad, "w") as f:
    f.write('{"version": 1, "rules": "x"}')


def listening(port):
    s = socket.socket()
    s.settimeout(1)
    try:
        s.connect(("127.0.0.1", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


def ports():
    return {k: t.free_port() for k in ("https", "http", "admin")}


def run(vault, p, *extra, timeout=30, during=None):
    args = [t.VG_BIN, "run", "--vault", vault, "--state-dir", os.path.join(d, "var"),
            "--listen-https", "127.0.0.1:%d" % p["https"],
            "--listen-http", "127.0.0.1:%d" % p["http"],
            "--admin", "127.0.0.1:%d" % p["admin"], "--threads", "2"]
    args += list(extra) + ([] if "--audit" in extra else ["--audit", "off"])
    t0 = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen = during(proc) if during else None
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        t.fail("%r did not exit" % extra)
    return proc.returncode, err.decode(), time.monotonic() - t0, seen


def expect(code, word, vault, *extra, p=None, during=None):
    p = p or ports()
    rc, err, secs, seen = run(vault, p, *extra, during=during)
    lines = err.strip().splitlines()
    t.check(rc == code, "%s: exit %d, want %d: %s" % (word, rc, code, err))
    t.check(len(lines) == 1 and word in lines[0], "%s: stderr %r" % (word, err))
    for k, port in p.items():
        if k != "held":
            t.check(not listening(port), "%s: something listens on the %s port" % (word, k))
    t.log("exit %d (%.2fs): %s" % (rc, secs, lines[0]))
    return secs, seen


# invalid vault
expect(3, "rules", bad)
# unreadable vault: a directory
expect(3, "vault", d)


# missing vault, --vault-wait 1.5: the wait is observed and nothing listens meanwhile
def watch(proc):
    """True when nothing listened at any look while the run waited (at least one look made
    while it still ran: a look ends only when the run exits, however slow the machine)."""
    looks = 0
    while proc.poll() is None:
        if any(listening(x) for x in watch.p.values()):
            return False
        if proc.poll() is None:
            looks += 1
        time.sleep(0.1)
    return looks > 0


watch.p = ports()
secs, quiet = expect(3, "vault", os.path.join(d, "missing.json"), "--vault-wait", "1.5",
                     p=watch.p, during=watch)
t.check(secs >= 1.4, "--vault-wait 1.5 took %.2fs" % secs)
t.check(quiet, "something listened (or it had exited) during --vault-wait")

# listener in use: a socket without SO_REUSEPORT holds the HTTP port
hold = socket.socket()
hold.bind(("127.0.0.1", 0))
hold.listen(1)
p = ports()
p["http"] = hold.getsockname()[1]
rc, err, _, _ = run(good, p)
t.check(rc == 4 and "listener http 127.0.0.1:%d" % p["http"] in err and
        len(err.strip().splitlines()) == 1, "listener in use: %d %r" % (rc, err))
t.check(not listening(p["https"]) and not listening(p["admin"]), "listening after exit 4")
hold.close()

# audit store that cannot be opened
expect(4, "audit", good, "--audit", "sqlite:" + os.path.join(d, "no", "such", "dir", "a.db"))

# non-loopback admin address
p = ports()
rc, err, _, _ = run(good, p, "--admin", "192.0.2.1:9090")
t.check(rc == 2 and "--admin" in err and len(err.strip().splitlines()) == 1,
        "admin non-loopback: %d %r" % (rc, err))

# --max-connections: an integer from 1
for v in ("0", "1.5", "x"):
    rc, err, _, _ = run(good, ports(), "--max-connections", v)
    t.check(rc == 2 and "--max-connections" in err and len(err.strip().splitlines()) == 1,
            "--max-connections %s: %d %r" % (v, rc, err))

# a vault that appears during --vault-wait: the gateway starts
late = os.path.join(d, "late.json")
threading.Timer(0.6, lambda: os.link(good, late)).start()
os.makedirs(os.path.join(d, "late"), exist_ok=True)
vg = t.Vaultgate(os.path.join(d, "late"), late, extra=["--vault-wait", "60"])
t0 = time.monotonic()
vg.start()
t.check(time.monotonic() - t0 >= 0.5, "started before the vault existed")
rc = vg.stop()
t.check(rc == 0, "late vault: exit %s" % rc)
