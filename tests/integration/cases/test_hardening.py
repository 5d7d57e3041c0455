#!/usr/bin/env python3
"""Process hardening (SPEC §8), as root with --user nobody: the process runs as nobody, its
state directory and SQLite store belong to nobody and the audit store is still written; an env
secret is injected yet gone from /proc/<pid>/environ, its value and its variable name (root
reads it: the entry was overwritten in the original environment block, not just unset), while
the other variables stay; the process is not dumpable,
so another process of the same user cannot read /proc/<pid>/environ; core files are off."""
import os
import pwd
import random
import shutil
import subprocess
import vgtest as t

if os.geteuid() != 0:
    t.skip("needs root (privilege drop, reading a non-dumpable process's /proc files)")
if not shutil.which("setpriv"):
    t.skip("needs setpriv")
try:
    nobody = pwd.getpwnam("nobody")
except KeyError:
    t.skip("no user nobody")
SECRET = "sk-canary-ENVIRON-4242-hardening"
VAR = "VG_CANARY_ENVNAME_%08X" % random.getrandbits(32)
os.environ[VAR] = SECRET
os.environ["VG_HARD_NEIGHBOUR"] = "stays"
os.chmod(t.tmpdir(), 0o711)
v = t.example_vault(secrets={"API_KEY": {"env": VAR}})
d, certs, up, vg = t.setup(vault=v, audit="sqlite", extra=["--user", "nobody"])
del os.environ[VAR]
del os.environ["VG_HARD_NEIGHBOUR"]
pid = vg.proc.pid
try:
    st = {l.split(":")[0]: l.split()[1:] for l in open("/proc/%d/status" % pid)}
    t.check(all(x == str(nobody.pw_uid) for x in st["Uid"]), "uids %r" % st["Uid"])
    t.check(all(x == str(nobody.pw_gid) for x in st["Gid"]), "gids %r" % st["Gid"])
    t.check(os.stat(vg.state).st_uid == nobody.pw_uid, "state dir owner")
    t.check(os.stat(os.path.join(vg.state, "audit.db")).st_uid == nobody.pw_uid, "audit owner")

    r = vg.request("api.example.test", b"GET / HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 200 and up.requests[-1].header("Authorization") == ["Bearer " + SECRET],
            "the env secret was not injected: %r" % up.requests[-1:])
    r = vg.request("blocked.example.test", b"GET / HTTP/1.1\r\nHost: blocked.example.test\r\n\r\n")
    t.check(r.status == 403, "%r" % r)

    def blocked_rows():
        code, body = vg.admin_get("/v1/blocked-hosts")
        return code == 200 and b"blocked.example.test" in body

    t.check(t.wait_for(blocked_rows, timeout=30), "the audit store was not written as nobody")

    env = open("/proc/%d/environ" % pid, "rb").read()  # root may read it
    t.check(env, "empty /proc/pid/environ")
    t.check(SECRET.encode() not in env, "the secret is in /proc/%d/environ" % pid)
    t.check(SECRET[:8].encode() not in env, "a prefix of it is there")
    t.check(VAR.encode() not in env, "the variable's name is in /proc/%d/environ" % pid)
    t.check(b"PATH=" in env and b"\0VG_HARD_NEIGHBOUR=stays\0" in env,
            "environ unreadable in a way that proves nothing: %r" % env[:200])

    # same uid as the process, but it is not dumpable: no access
    p = subprocess.run(["setpriv", "--reuid", str(nobody.pw_uid), "--regid", str(nobody.pw_gid),
                        "--clear-groups", "cat", "/proc/%d/environ" % pid],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t.check(p.returncode != 0 and not p.stdout, "nobody read the environ: %r" % p.stdout[:80])
    t.check(b"Permission denied" in p.stderr, "reader: %r" % p.stderr)
    limits = open("/proc/%d/limits" % pid).read()
    core = [l for l in limits.splitlines() if l.startswith("Max core file size")]
    t.check(core and core[0].split()[4:6] == ["0", "0"], "core limit %r" % core)
finally:
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s:\n%s" % (rc, vg.stderr()))
t.check(SECRET not in vg.stderr(), "the secret in the log")
