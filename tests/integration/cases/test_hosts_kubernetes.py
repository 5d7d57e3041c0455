#!/usr/bin/env python3
"""`vaultgate hosts --format kubernetes` (SPEC §13): the pod spec's hostAliases: block for default
routing - the same names as the /etc/hosts lines, in the same order, one entry for the proxy IP -
ready to paste under `spec:`; --format hosts is the default output; a catch-all vault exits 1
with the reason and prints nothing; a vault without designated names prints an empty list; an
unknown or repeated --format is a usage error (exit 2, one line); no secret source is read."""
import json
import os
import subprocess
import vgtest as t

EXAMPLE = os.path.join(t.SRC, "conf", "vault.example.json")
CATCHALL = os.path.join(t.SRC, "conf", "vault.catchall.example.json")


def run(*args):
    p = subprocess.run([t.VG_BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


t.require_binary()
d = t.tmpdir()
rc, lines, err = run("hosts", "--vault", EXAMPLE, "--proxy-ip", "127.0.0.1")
t.check(rc == 0 and lines, "hosts: exit %d %r" % (rc, err))
names = [ln.split()[1] for ln in lines.splitlines()]
rc, same, err = run("hosts", "--vault", EXAMPLE, "--proxy-ip", "127.0.0.1", "--format", "hosts")
t.check(rc == 0 and same == lines, "--format hosts differs from the default: %r" % same)

rc, out, err = run("hosts", "--vault", EXAMPLE, "--proxy-ip", "127.0.0.1", "--format",
                   "kubernetes")
t.check(rc == 0 and err == "", "kubernetes: exit %d %r" % (rc, err))
want = ('hostAliases:\n  - ip: "127.0.0.1"\n    hostnames:\n' +
        "".join('      - "%s"\n' % n for n in names))
t.check(out == want, "hostAliases block:\n%s\nwanted:\n%s" % (out, want))
t.log(out.rstrip())

# IPv6, and a vault whose secret comes from an unset variable and a missing file
v = os.path.join(d, "v.json")
with open(v, "w") as f:
    json.dump({"version": 1,
               "secrets": {"E": {"env": "VG_TEST_UNSET_VARIABLE"}, "F": {"file": "/nonexistent"}},
               "rules": [{"host_pattern": "api.example.test", "secret": "E", "scheme": "bearer"},
                         {"host_pattern": "192.0.2.7", "secret": "F", "scheme": "bearer"}],
               "host_policy": {"hosts": {"blocked.example.test": "block"}}}, f)
rc, out, err = run("hosts", "--vault", v, "--proxy-ip", "::1", "--format", "kubernetes")
t.check(rc == 0, "ipv6: exit %d %r" % (rc, err))
t.check(out == 'hostAliases:\n  - ip: "::1"\n    hostnames:\n      - "api.example.test"\n'
        '      - "blocked.example.test"\n', "ipv6 block: %r" % out)
t.check("192.0.2.7 is an IP literal" in err, "IP literal note: %r" % err)

# nothing designated: an empty list, still a valid mapping
with open(v, "w") as f:
    json.dump({"version": 1, "host_policy": {"hosts": {"pypi.org": "allow"}}}, f)
rc, out, err = run("hosts", "--vault", v, "--proxy-ip", "127.0.0.1", "--format", "kubernetes")
t.check(rc == 0 and out == "hostAliases: []\n", "empty: exit %d %r" % (rc, out))

rc, out, err = run("hosts", "--vault", CATCHALL, "--proxy-ip", "127.0.0.1", "--format",
                   "kubernetes")
t.check(rc == 1 and out == "" and "needs catch-all routing" in err,
        "catch-all: exit %d %r %r" % (rc, out, err))

for args, needle in [(["--format", "yaml"], "--format: expected hosts or kubernetes"),
                     (["--format", "kubernetes", "--format", "hosts"], "--format"),
                     (["--format"], "--format")]:
    rc, out, err = run("hosts", "--vault", EXAMPLE, "--proxy-ip", "127.0.0.1", *args)
    t.check(rc == 2 and out == "" and err.count("\n") == 1 and needle in err,
            "%s: exit %d %r" % (args, rc, err))
rc, out, err = run("hosts", "--help")
t.check(rc == 0 and "--format" in out and "hostAliases" in out, "hosts --help: %r" % out)
