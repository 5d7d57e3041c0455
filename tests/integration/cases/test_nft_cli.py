#!/usr/bin/env python3
"""`vaultgate nft`: what it renders for each --where, its usage errors (exit 2), an invalid vault
(exit 3), and exit 4 with exactly one stderr line carrying nft's own reason when `nft -f -`
fails: a stand-in `nft` first on PATH that refuses, no `nft` at all, and the real nft run as
nobody (not permitted to change the ruleset)."""
import json
import os
import shutil
import stat
import subprocess

import vgtest as t

t.require_binary()
d = t.tmpdir()
vault = os.path.join(d, "v.json")
with open(vault, "w") as f:
    json.dump(t.example_vault(run_id="run-nft-3", default="block"), f)


def nft(*args, env=None):
    p = subprocess.run([t.VG_BIN, "nft"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, env=env)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


rc, out, err = nft("--vault", vault, "--sandbox-if", "vsb0", "--https-port", "9443",
                   "--http-port", "9080", "--dns", "10.9.9.53")
t.check(rc == 0, "gateway render failed: %s" % err)
for line in ('table inet vaultgate\ndelete table inet vaultgate\n',
             'iifname "vsb0" tcp dport 443 counter redirect to :9443',
             'iifname "vsb0" tcp dport 80 counter redirect to :9080',
             'iifname "vsb0" ip daddr 10.9.9.53 udp dport 53 accept',
             'iifname "vsb0" counter name dropped_forward drop',
             'iifname "vsb0" counter name dropped_input drop',
             'run run-nft-3', 'catch-all'):
    t.check(line in out, "gateway ruleset lacks %r:\n%s" % (line, out))

rc, out, err = nft("--vault", vault, "--where", "sandbox", "--proxy-ip", "10.9.9.1")
t.check(rc == 0, "sandbox render failed: %s" % err)
for line in ("tcp dport 443 counter dnat ip to 10.9.9.1:8443",
             "tcp dport 80 counter dnat ip to 10.9.9.1:8080",
             "type filter hook output priority filter; policy drop;",
             'oifname "lo" accept', "counter name dropped_output drop"):
    t.check(line in out, "sandbox ruleset lacks %r:\n%s" % (line, out))
t.check("udp dport 53" not in out, "DNS allowed without --dns")

rc, out, err = nft("--vault", vault, "--where", "sandbox", "--proxy-ip", "fd00::1")
t.check(rc == 0 and "dnat ip6 to [fd00::1]:8443" in out, "IPv6 proxy: %s %s" % (out, err))

for args, word in ((["--vault", vault, "--where", "elsewhere"], "--where"),
                   (["--vault", vault, "--where", "sandbox"], "--proxy-ip"),
                   (["--vault", vault, "--https-port", "0"], "--https-port"),
                   (["--vault", vault, "--dns", "resolver.example"], "--dns"),
                   (["--vault", vault, "--sandbox-if", 'x" accept #'], "--sandbox-if"),
                   (["--bogus"], "--bogus"), ([], "--vault")):
    rc, out, err = nft(*args)
    t.check(rc == 2 and word in err and len(err.strip().splitlines()) == 1,
            "usage error %r: rc=%d %r" % (args, rc, err))

bad = os.path.join(d, "bad.json")
with open(bad, "w") as f:
    f.write('{"version": 2}')
rc, out, err = nft("--vault", bad)
t.check(rc == 3 and "version" in err, "invalid vault: rc=%d %r" % (rc, err))

fake = os.path.join(d, "bin")
os.mkdir(fake)
with open(os.path.join(fake, "nft"), "w") as f:
    f.write("#!/bin/sh\ncat >/dev/null\necho 'Error: refused by the test' >&2\nexit 1\n")
os.chmod(os.path.join(fake, "nft"), stat.S_IRWXU)
env = dict(os.environ, PATH=fake + ":" + os.environ.get("PATH", ""))


def one_line(what, rc, err, *words):
    """SPEC §9: a failed --apply is exit 4 and exactly one line on stderr with nft's reason."""
    t.check(rc == 4 and err.count("\n") == 1 and err.endswith("\n") and
            all(w in err for w in ("not installed",) + words),
            "%s: rc=%d, want 4 and one line with %r: %r" % (what, rc, words, err))


rc, out, err = nft("--vault", vault, "--apply", env=env)
one_line("failing nft", rc, err, "Error: refused by the test")
# a vault that needs only default routing has a note on success, never beside the failure
dvault = os.path.join(d, "default.json")
with open(dvault, "w") as f:
    json.dump(t.example_vault(run_id="run-nft-3"), f)
rc, out, err = nft("--vault", dvault, "--apply", env=env)
one_line("failing nft, default-routing vault", rc, err, "Error: refused by the test")
# no nft at all
empty = os.path.join(d, "empty")
os.mkdir(empty)
rc, out, err = nft("--vault", vault, "--apply", env=dict(os.environ, PATH=empty))
one_line("no nft", rc, err, "cannot run nft: No such file or directory")

# the real nft, run by a user who may not change the ruleset
if os.geteuid() == 0 and shutil.which("setpriv") and shutil.which("nft"):
    os.chmod(d, 0o755)
    os.chmod(vault, 0o644)
    p = subprocess.run(["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups",
                        t.VG_BIN, "nft", "--vault", vault, "--apply"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    one_line("nft as nobody", p.returncode, p.stderr.decode(), "Error:",
             "Operation not permitted")
    t.log("as nobody: " + p.stderr.decode().strip())
else:
    t.log("note: not root, or no setpriv or nft: the real-nft failure is not tried")
