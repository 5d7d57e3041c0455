#!/usr/bin/env python3
"""The state directory a sandbox user can read by name (SPEC §2): created 0711, ca.pem and the
trust files (vaultgate trust's bundle, root copy, truststore, wgetrc written beside it) 0644,
everything else 0600 - the SQLite audit store and its -wal and -shm files too. As the user
nobody (setpriv), ca.pem and the bundle are read by name; the directory cannot be listed and
the audit store cannot be read."""
import os
import shutil
import stat
import subprocess

import vgtest as t

if os.geteuid() != 0 or not shutil.which("setpriv"):
    t.skip("needs root and setpriv to act as nobody")
t.require_binary()
d = t.tmpdir()
os.chmod(d, 0o755)  # the case's own directory: nobody may walk through it
vg = t.Vaultgate(d, t.example_vault(), audit="sqlite").start()


def mode(p):
    return stat.S_IMODE(os.stat(p).st_mode)


def as_nobody(args):
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "--"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          timeout=30)


try:
    t.check(mode(vg.state) == 0o711, "state dir mode %04o, want 0711" % mode(vg.state))
    t.check(mode(vg.ca) == 0o644, "ca.pem mode %04o" % mode(vg.ca))
    p = subprocess.run([t.VG_BIN, "trust", "--ca", vg.ca], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    t.check(p.returncode == 0 and b"keeps other users out" not in p.stderr,
            "trust in the state dir: %d %r" % (p.returncode, p.stderr))
    public = {"ca.pem", "bundle.pem", "truststore.p12", "wgetrc"}
    names = sorted(os.listdir(vg.state))
    for f in ("audit.db", "audit.db-wal", "audit.db-shm"):
        t.check(f in names, "%s missing from the state dir: %r" % (f, names))
    for f in names:
        want = 0o644 if f in public else 0o600
        t.check(mode(os.path.join(vg.state, f)) == want, "%s mode %04o, want %04o" %
                (f, mode(os.path.join(vg.state, f)), want))
    with open(vg.ca, "rb") as f:
        pem = f.read()
    r = as_nobody(["cat", vg.ca])
    t.check(r.returncode == 0 and r.stdout == pem, "nobody cannot read ca.pem: %r" % r.stderr)
    r = as_nobody(["cat", os.path.join(vg.state, "bundle.pem")])
    t.check(r.returncode == 0 and r.stdout.startswith(pem), "nobody cannot read the bundle: %r"
            % r.stderr)
    r = as_nobody(["ls", vg.state])
    t.check(r.returncode != 0, "nobody lists the state dir: %r" % r.stdout)
    r = as_nobody(["cat", os.path.join(vg.state, "audit.db")])
    t.check(r.returncode != 0 and r.stdout == b"", "nobody reads the audit store")
    t.check(vg.stop() == 0, "stop")
    left = sorted(os.listdir(vg.state))
    for f in left:
        want = 0o644 if f in public else 0o600
        t.check(mode(os.path.join(vg.state, f)) == want, "after stop: %s mode %04o" %
                (f, mode(os.path.join(vg.state, f))))
finally:
    vg.kill()
t.log("ok state dir 0711, public files 0644, the rest 0600; nobody reads ca.pem by name")
