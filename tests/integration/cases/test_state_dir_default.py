#!/usr/bin/env python3
"""The default state directory (SPEC §2): $STATE_DIRECTORY when systemd sets it (the first of a
colon-separated list), from any working directory, / included - ca.pem and the audit store land
there and nowhere else; ./var otherwise; and started in / with neither --state-dir nor
$STATE_DIRECTORY, `run` exits 2 with one line naming --state-dir and writes nothing (never the
system's /var/ca.pem or /var/audit.db)."""
import os
import subprocess

import vgtest as t

t.require_binary()
d = t.tmpdir()
env0 = {k: v for k, v in os.environ.items() if k != "STATE_DIRECTORY"}


def start(run, cwd, env, extra=()):
    """vaultgate run without --state-dir (the audit store at its default); waits for /readyz."""
    os.makedirs(run, exist_ok=True)
    vg = t.Vaultgate(run, t.example_vault(), audit="sqlite")
    i = vg.args.index("--state-dir")
    del vg.args[i:i + 2]
    i = vg.args.index("--audit")
    del vg.args[i:i + 2]
    vg.args += list(extra)
    vg.errf = open(vg.stderr_path, "wb")
    vg.proc = subprocess.Popen(vg.args, stdout=subprocess.DEVNULL, stderr=vg.errf, cwd=cwd,
                               env=env)
    t._started.append(vg.proc)
    vg.wait_ready()
    return vg


def served_from(vg, sd, shown=None):
    st = vg.status()
    t.check(st["audit"]["store"] == "sqlite:%s/audit.db" % (shown or sd),
            "audit store %r, want under %s" % (st["audit"]["store"], shown or sd))
    for f in ("ca.pem", "audit.db"):
        t.check(os.path.isfile(os.path.join(sd, f)), "%s not in %s: %r" % (f, sd, os.listdir(sd)
                                                                          if os.path.isdir(sd)
                                                                          else None))
    with open(os.path.join(sd, "ca.pem"), "rb") as f:
        pem = f.read()
    st, body = vg.admin_get("/ca.pem")
    t.check(st == 200 and body == pem, "the served root is not the one in %s" % sd)
    t.check(vg.stop() == 0, "stop")


# $STATE_DIRECTORY, started elsewhere: the directory systemd names, not ./var
sd = os.path.join(d, "lib-vaultgate")
work = os.path.join(d, "work")
os.makedirs(work)
vg = start(os.path.join(d, "r1"), work, dict(env0, STATE_DIRECTORY=sd))
served_from(vg, sd)
t.check(not os.path.exists(os.path.join(work, "var")), "./var made despite $STATE_DIRECTORY")
t.log("ok $STATE_DIRECTORY from another working directory")

# several state directories: the first one
sd2 = os.path.join(d, "first")
vg = start(os.path.join(d, "r2"), "/", dict(env0, STATE_DIRECTORY=sd2 + ":" +
                                            os.path.join(d, "second")))
served_from(vg, sd2)
t.check(not os.path.exists(os.path.join(d, "second")), "the second directory was made")
t.log("ok $STATE_DIRECTORY with two directories, started in /")

# neither: ./var of the working directory
vg = start(os.path.join(d, "r3"), work, env0)
served_from(vg, os.path.join(work, "var"), "./var")
t.log("ok ./var without $STATE_DIRECTORY")

# neither, started in /: exit 2, one line naming --state-dir, nothing written into /var
before = {f: os.path.exists(os.path.join("/var", f)) for f in ("ca.pem", "audit.db")}
vault = os.path.join(d, "r3", "vault.json")
# (the first one could write nothing into /var even if it started)
for extra in (["--audit", "off", "--ca-out", os.path.join(d, "elsewhere.pem")], []):
    p = subprocess.run([t.VG_BIN, "run", "--vault", vault, "--listen-https",
                        "127.0.0.1:%d" % t.free_port(), "--listen-http", "none", "--admin",
                        "127.0.0.1:%d" % t.free_port()] + extra, cwd="/", env=env0,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=10)
    lines = p.stderr.decode().splitlines()
    t.check(p.returncode == 2 and len(lines) == 1 and "--state-dir" in lines[0],
            "started in / without a state dir: exit %d %r" % (p.returncode, lines))
    t.check({f: os.path.exists(os.path.join("/var", f)) for f in before} == before,
            "vaultgate wrote into /var")
t.log("ok started in /: %s" % lines[0])
