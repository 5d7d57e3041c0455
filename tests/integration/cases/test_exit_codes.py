#!/usr/bin/env python3
"""Fail closed with the exit codes of SPEC §8: usage errors 2 (one line naming the option),
invalid or unreadable vault 3, a listener that cannot bind 4, an admin address in use 4; and
nothing listens afterwards."""
import json
import os
import socket
import subprocess
import vgtest as t

t.require_binary()
d = t.tmpdir()
good = os.path.join(d, "good.json")
with open(good, "w") as f:
    json.dump(t.example_vault(), f)
bad = os.path.join(d, "bad.json")
with open(bad, "w") as f:
    f.write('{"version": 2}')


def run(*args, timeout=20):
    p = subprocess.run([t.VG_BIN, "run"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    return p.returncode, p.stderr.decode()


base = ["--state-dir", os.path.join(d, "var"), "--audit", "off", "--listen-http", "none"]
adm = ["--admin", "127.0.0.1:%d" % t.free_port()]
# usage
for args, word in ((["--vault"], "--vault"), ([], "--vault"),
                   (["--vault", good, "--threads", "0"], "--threads"),
                   (["--vault", good, "--listen-https", "localhost:443"], "--listen-https"),
                   (["--vault", good, "--listen-https", "127.0.0.1:99999"], "--listen-https"),
                   (["--vault", good, "--admin", "10.1.2.3:9090"], "--admin"),
                   (["--vault", good, "--log-level", "loud"], "--log-level"),
                   (["--vault", good, "--resolve", "nonsense"], "resolve"),
                   (["--vault", good, "--bogus"], "--bogus"),
                   (["--vault", good, "--audit", "mysql://x"], "--audit")):
    rc, err = run(*args)
    t.check(rc == 2, "%r: exit %d (%s)" % (args, rc, err))
    t.check(len(err.strip().splitlines()) == 1 and word in err, "%r: %r" % (args, err))
# vault
rc, err = run("--vault", bad, *base, *adm)
t.check(rc == 3, "invalid vault: exit %d %s" % (rc, err))
rc, err = run("--vault", os.path.join(d, "missing.json"), *base, *adm)
t.check(rc == 3, "missing vault: exit %d %s" % (rc, err))
rc, err = run("--vault", os.path.join(d, "missing.json"), "--vault-wait", "0.5", *base, *adm)
t.check(rc == 3, "missing vault after --vault-wait: exit %d %s" % (rc, err))
# listener in use (a plain socket without SO_REUSEPORT)
hold = socket.socket()
hold.bind(("127.0.0.1", 0))
hold.listen(1)
port = hold.getsockname()[1]
rc, err = run("--vault", good, "--listen-https", "127.0.0.1:%d" % port, *base, *adm)
t.check(rc == 4, "listener in use: exit %d %s" % (rc, err))
t.check("listener" in err, "reason: %r" % err)
# admin in use
rc, err = run("--vault", good, "--listen-https", "127.0.0.1:%d" % t.free_port(), *base,
              "--admin", "127.0.0.1:%d" % port)
t.check(rc == 4, "admin in use: exit %d %s" % (rc, err))
# audit store that cannot be opened
rc, err = run("--vault", good, "--listen-https", "127.0.0.1:%d" % t.free_port(),
              "--state-dir", os.path.join(d, "var"), "--listen-http", "none", *adm,
              "--audit", "sqlite:" + os.path.join(d, "no", "such", "dir", "a.db"))
t.check(rc == 4, "audit store: exit %d %s" % (rc, err))
hold.close()
