#!/usr/bin/env python3
"""The Debian package (SPEC §11): `dpkg-buildpackage -us -uc -b` builds vaultgate_*.deb from a
copy of the source tree (debian/ as committed, the project's tests left out of the package
build), `apt-get install ./vaultgate_*.deb` installs it, and then:
- /usr/bin/vaultgate checks the installed example vaults and runs one (a copy, mode 0600) until
  /readyz answers and /v1/status names the run, then stops cleanly (exit 0);
- the unit, the sysusers.d file, the man pages and the completion are where dpkg says, the
  user vaultgate exists (systemd-sysusers ran), /etc/vaultgate exists;
- `apt-get purge` removes it again.
Slow (a full optimised build): skipped under the sanitizers, where it would test nothing the
plain pass does not (the package builds its own binary). Needs root, dpkg-buildpackage and
debhelper (scripts/deps installs them). Touches the machine's package database: it refuses to
run when a vaultgate package it did not install is present."""
import json
import os
import shutil
import signal
import subprocess
import time
import urllib.request

import vgtest as t


def sh(args, timeout=900, **kw):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          timeout=timeout, **kw)


def installed():
    r = sh(["dpkg-query", "-W", "-f", "${Status}", "vaultgate"])
    return r.returncode == 0 and b"install ok installed" in r.stdout


def copy_tree(dst):
    """The source tree as git sees it (tracked and new files, not ignored ones)."""
    r = subprocess.run(["git", "-C", t.SRC, "ls-files", "-co", "--exclude-standard", "-z"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t.check(r.returncode == 0, "git ls-files: %s" % r.stderr.decode())
    for rel in r.stdout.decode().split("\0"):
        if not rel or rel.endswith(".png") or rel.startswith("fuzz/corpus/"):
            continue
        src = os.path.join(t.SRC, rel)
        if not os.path.isfile(src):
            continue  # deleted in the work tree
        out = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(out), exist_ok=True)
        shutil.copy2(src, out)


def run_installed(d):
    vault = os.path.join(d, "vault.json")
    shutil.copy("/usr/share/doc/vaultgate/vault.example.json", vault)
    os.chmod(vault, 0o600)
    admin, https = t.free_port(), t.free_port()
    err = open(os.path.join(d, "run.stderr"), "wb")
    p = subprocess.Popen(["/usr/bin/vaultgate", "run", "--vault", vault, "--state-dir",
                          os.path.join(d, "state"), "--listen-https", "127.0.0.1:%d" % https,
                          "--listen-http", "none", "--admin", "127.0.0.1:%d" % admin],
                         stdout=subprocess.DEVNULL, stderr=err)
    try:
        def ready():
            try:
                return urllib.request.urlopen("http://127.0.0.1:%d/readyz" % admin,
                                              timeout=2).status == 200
            except OSError:
                return False
        t.check(t.wait_for(ready, 15), "the installed vaultgate is not ready")
        st = json.loads(urllib.request.urlopen("http://127.0.0.1:%d/v1/status" % admin,
                                               timeout=5).read())
        t.check(st["run"]["id"] == "example-run-1" and st["enforcement"] == "enforced",
                "status %r" % st)
    finally:
        p.send_signal(signal.SIGTERM)
        rc = p.wait(30)
    t.check(rc == 0, "installed vaultgate stopped with %d" % rc)


def main():
    t.require_binary()
    if os.environ.get("ASAN_OPTIONS") or os.environ.get("UBSAN_OPTIONS"):
        t.skip("sanitizer pass: the package builds its own binary; the plain pass covers it")
    if os.geteuid() != 0:
        t.skip("installing a package needs root")
    for tool in ("dpkg-buildpackage", "dh", "apt-get", "git"):
        if not shutil.which(tool):
            t.skip("%s is not installed (scripts/deps installs it)" % tool)
    if installed():
        t.skip("a vaultgate package is already installed here; not touching it")
    d = t.tmpdir()
    src = os.path.join(d, "vaultgate")
    copy_tree(src)
    start = time.monotonic()
    env = dict(os.environ, DEB_BUILD_OPTIONS="nocheck noddebs parallel=%d" %
               min(2, os.cpu_count() or 1))
    r = sh(["dpkg-buildpackage", "-us", "-uc", "-b"], cwd=src, env=env)
    t.check(r.returncode == 0, "dpkg-buildpackage failed:\n%s" % r.stdout.decode()[-4000:])
    built = time.monotonic() - start
    debs = [f for f in os.listdir(d) if f.startswith("vaultgate_") and f.endswith(".deb")]
    t.check(len(debs) == 1, "built %r" % os.listdir(d))
    r = sh(["apt-get", "install", "-y", "--no-install-recommends", "./" + debs[0]], cwd=d,
           env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    try:
        t.check(r.returncode == 0 and installed(), "apt-get install:\n%s" %
                r.stdout.decode()[-3000:])
        files = sh(["dpkg", "-L", "vaultgate"]).stdout.decode().splitlines()
        for want in ("/usr/bin/vaultgate", "/lib/systemd/system/vaultgate.service",
                     "/usr/lib/sysusers.d/vaultgate.conf",
                     "/usr/share/man/man8/vaultgate.8.gz",
                     "/usr/share/man/man5/vaultgate-vault.5.gz",
                     "/usr/share/bash-completion/completions/vaultgate",
                     "/usr/share/doc/vaultgate/vault.example.json",
                     "/usr/share/doc/vaultgate/vault.providers.example.json"):
            t.check(want in files, "the package lacks %s" % want)
        t.check(sh(["getent", "passwd", "vaultgate"]).returncode == 0, "no user vaultgate")
        t.check(os.path.isdir("/etc/vaultgate"), "no /etc/vaultgate")
        r = sh(["/usr/bin/vaultgate", "check", "--vault",
                "/usr/share/doc/vaultgate/vault.example.json"])
        t.check(r.returncode == 0 and r.stdout.startswith(b"ok: "), "check: %r" % r.stdout)
        run_installed(d)
    finally:
        p = sh(["apt-get", "purge", "-y", "vaultgate"],
               env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    t.check(p.returncode == 0 and not installed(), "apt-get purge: %s" % p.stdout.decode()[-800:])
    t.log("ok package: built in %.0fs, installed, ran the example vault, purged" % built)


if __name__ == "__main__":
    main()
