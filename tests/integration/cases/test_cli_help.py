#!/usr/bin/env python3
"""The command line a new operator meets (issue: docs a new operator can follow):
- `vaultgate help`, `vaultgate --help`, `vaultgate help COMMAND` and `COMMAND --help` for every
  subcommand: usage on stdout, nothing on stderr, exit 0; `help COMMAND` is `COMMAND --help`;
  every command of the list has its own usage, and every option of `run --help` is in the
  operations doc and the man page source.
- typos get the nearest known word: a command, an option, a vault field.
- every error names what it is about: the vault path (run, check), the listener or admin address
  in use (an --admin that is a listener's own address too, exit 2 naming both), and a hint for a
  port below 1024 without root on every listener kind and the admin API (the binary started as
  nobody with runuser).
- `vaultgate hosts` and `vaultgate nft` need no secret value: an env variable that is not set and a secret file
  that does not exist are fine (names only), and the environment variable stays unread."""
import json
import os
import re
import shutil
import socket
import subprocess

import vgtest as t

COMMANDS = ["run", "check", "hosts", "nft", "probe", "audit", "trust", "health", "version", "help"]


def run(*args, user=None, env=None, cwd=None):
    cmd = [t.VG_BIN] + list(args)
    if user:
        cmd = ["setpriv", "--reuid=" + user, "--regid=nogroup", "--clear-groups"] + cmd
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30,
                       env=env, cwd=cwd)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


def help_everywhere():
    rc, top, err = run("help")
    t.check(rc == 0 and err == "" and top.startswith("usage: vaultgate <command>"), "help: %d %r"
            % (rc, err))
    for form in (["--help"], ["-h"], ["help", "help"]):
        rc, out, err = run(*form)
        t.check(rc == 0 and out == top and err == "", "%s: %d" % (form, rc))
    listed = re.findall(r"^  (\w+) ", top, re.M)
    t.check(listed == COMMANDS, "help lists %r" % listed)
    seen = set()
    for c in COMMANDS[:-1]:
        rc, out, err = run(c, "--help")
        t.check(rc == 0 and err == "" and out.startswith("usage: vaultgate " + c),
                "%s --help: %d %r %r" % (c, rc, out[:60], err))
        rc2, out2, err2 = run("help", c)
        t.check(rc2 == 0 and out2 == out and err2 == "", "help %s differs from %s --help" % (c, c))
        rc3, out3, _ = run(c, "-h")
        t.check(rc3 == 0 and out3 == out, "%s -h" % c)
        t.check(out not in seen, "%s shares its usage with another command" % c)
        seen.add(out)
    rc, out, err = run("help", "nosuch")
    t.check(rc == 2 and out == "" and "unknown command 'nosuch'" in err, "help nosuch: %r" % err)
    # every option of run is documented (help, docs/operations.md, the man page source)
    _, usage, _ = run("run", "--help")
    opts = sorted(set(re.findall(r"^  (--[a-z-]+)", usage, re.M)))
    t.check(len(opts) >= 20 and "--timeout" in opts, "run --help options %r" % opts)
    with open(os.path.join(t.SRC, "docs", "operations.md")) as f:
        ops = f.read()
    for o in opts:
        t.check("`%s" % o in ops, "docs/operations.md lacks %s" % o)
    t.log("ok help: %d commands, %d run options documented" % (len(COMMANDS), len(opts)))


def typos(d):
    rc, _, err = run("rnu")
    t.check(rc == 2 and err == "vaultgate: unknown command 'rnu'; did you mean 'run'? "
            "(see: vaultgate help)\n", "command typo: %r" % err)
    rc, _, err = run("run", "--listen-htps", "x")
    t.check(rc == 2 and "unknown option '--listen-htps'; did you mean --listen-https?" in err,
            "option typo: %r" % err)
    rc, _, err = run("trust", "--bundel-out", "x")
    t.check(rc == 2 and "did you mean --bundle-out?" in err, "trust option typo: %r" % err)
    v = os.path.join(d, "typo.json")
    with open(v, "w") as f:
        json.dump({"version": 1, "secrets": {"A": {"value": "sk-canary-TYPO-0001"}},
                   "rules": [{"host_patern": "a.example.test", "secret": "A",
                              "scheme": "bearer"}]}, f)
    rc, out, err = run("check", "--vault", v)
    t.check(rc == 3 and err == 'error: %s: rules[0].host_patern: unknown field; did you mean '
            '"host_pattern"?\n' % v, "vault field typo: %r" % err)
    t.check("sk-canary" not in out + err, "the secret in a typo error")
    t.log("ok typos: command, option, vault field")


def errors_name_things(d):
    missing = os.path.join(d, "nowhere", "vault.json")
    rc, _, err = run("run", "--vault", missing, "--state-dir", os.path.join(d, "s0"))
    t.check(rc == 3 and err == "vaultgate run: %s: cannot read vault: No such file or directory\n"
            % missing, "missing vault: %r" % err)
    v = os.path.join(d, "v.json")
    with open(v, "w") as f:
        json.dump(t.example_vault(), f)
    os.chmod(v, 0o644)  # nobody must read it below
    os.chmod(d, 0o755)
    # an address something already listens on: the listener, then the admin API
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    busy = s.getsockname()[1]
    rc, _, err = run("run", "--vault", v, "--state-dir", os.path.join(d, "s1"), "--listen-https",
                     "127.0.0.1:%d" % busy, "--listen-http", "none", "--admin",
                     "127.0.0.1:%d" % t.free_port(), "--audit", "off")
    t.check(rc == 4 and "listener https 127.0.0.1:%d: Address already in use" % busy in err,
            "listener in use: %r" % err)
    rc, _, err = run("run", "--vault", v, "--state-dir", os.path.join(d, "s2"), "--listen-https",
                     "127.0.0.1:%d" % t.free_port(), "--listen-http", "none", "--admin",
                     "127.0.0.1:%d" % busy, "--audit", "off")
    t.check(rc == 4 and "admin 127.0.0.1:%d: cannot listen: Address already in use" % busy in err,
            "admin in use: %r" % err)
    s.close()
    # the admin API on a listener's own address (both would bind; the listener's listen() would
    # blame "another socket"): a usage error that names the two
    port = t.free_port()
    for adm, lis in (("127.0.0.1:%d" % port, "127.0.0.1:%d" % port),
                     ("localhost:%d" % port, "0.0.0.0:%d" % port)):
        rc, _, err = run("run", "--vault", v, "--state-dir", os.path.join(d, "s3"),
                         "--listen-https", lis, "--listen-http", "none", "--admin", adm, "--audit",
                         "off")
        lines = [l for l in err.splitlines() if l.startswith("vaultgate run:")]
        t.check(rc == 2 and len(lines) == 1 and
                "--admin %s: the address of listener https %s" % (adm, lis) in lines[0],
                "admin on a listener's address: %d %r" % (rc, err))
    if os.geteuid() == 0 and shutil.which("runuser"):
        free = "127.0.0.1:%d" % t.free_port()
        for args, what in ((["--listen-https", "127.0.0.1:443", "--admin",
                             "127.0.0.1:%d" % t.free_port()], "listener https 127.0.0.1:443"),
                           (["--listen-https", free, "--listen-http", "127.0.0.1:80", "--admin",
                             "127.0.0.1:%d" % t.free_port()], "listener http 127.0.0.1:80"),
                           (["--listen-https", free, "--listen-proxy", "127.0.0.1:3128",
                             "--admin", "127.0.0.1:%d" % t.free_port()], None),
                           (["--listen-https", free, "--listen-proxy", "127.0.0.1:1023",
                             "--admin", "127.0.0.1:%d" % t.free_port()],
                            "listener proxy 127.0.0.1:1023"),
                           (["--listen-https", free, "--admin", "127.0.0.1:99"],
                            "admin 127.0.0.1:99: cannot listen")):
            nd = os.path.join(d, "nobody")
            os.makedirs(nd, exist_ok=True)
            os.chmod(nd, 0o1777)
            sd = os.path.join(nd, "state")
            shutil.rmtree(sd, ignore_errors=True)
            if "--listen-http" not in args:
                args = args + ["--listen-http", "none"]
            p = subprocess.Popen(["runuser", "-u", "nobody", "--", t.VG_BIN, "run", "--vault", v,
                                  "--state-dir", sd, "--audit", "off"] + args,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=d)
            if what is None:  # 3128 is above 1023: it starts (and is stopped), no hint
                t.wait_for(lambda: os.path.exists(os.path.join(sd, "ca.pem")) or
                           p.poll() is not None, timeout=15)
                p.terminate()
                _, err = p.communicate(timeout=30)
                t.check(b"needs root" not in err, "hint for port 3128: %r" % err)
                continue
            _, err = p.communicate(timeout=30)
            err = err.decode()
            lines = [l for l in err.splitlines() if l.startswith("vaultgate run:")]
            t.check(p.returncode == 4 and len(lines) == 1 and what in lines[0] and
                    lines[0].endswith("Permission denied (needs root, CAP_NET_BIND_SERVICE, "
                                      "or a port above 1023)"), "low port as nobody: %r" % err)
    else:
        t.log("note: not root or no runuser: the low-port hint is not checked")
    t.log("ok errors name the vault path, the address in use, the low-port hint")


def hosts_names_only(d):
    v = os.path.join(d, "unread.json")
    with open(v, "w") as f:
        json.dump({"version": 1, "secrets": {"K": {"env": "VG_TEST_UNSET_KEY"},
                                             "F": {"file": "/nonexistent/vg/secret"}},
                   "rules": [{"host_pattern": "api.openai.com", "secret": "K",
                              "scheme": "bearer"},
                             {"host_pattern": "api.anthropic.com", "secret": "F",
                              "scheme": "header", "name": "x-api-key"}],
                   "host_policy": {"hosts": {"evil.example.test": "block"}}}, f)
    env = {k: v for k, v in os.environ.items() if k != "VG_TEST_UNSET_KEY"}
    rc, out, err = run("hosts", "--vault", v, "--proxy-ip", "10.0.0.2", env=env)
    t.check(rc == 0 and out == "10.0.0.2 api.openai.com\n10.0.0.2 api.anthropic.com\n"
            "10.0.0.2 evil.example.test\n" and err == "", "hosts: %d %r %r" % (rc, out, err))
    rc, out, err = run("nft", "--vault", v, env=env)
    t.check(rc == 0 and "table inet vaultgate" in out, "nft without the secrets: %d %r" %
            (rc, err))
    rc, _, err = run("check", "--vault", v, env=env)
    t.check(rc == 3 and "VG_TEST_UNSET_KEY is not set" in err, "check reads the sources")
    t.log("ok hosts needs no secret value")


def main():
    t.require_binary()
    d = t.tmpdir()
    help_everywhere()
    typos(d)
    errors_name_things(d)
    hosts_names_only(d)


if __name__ == "__main__":
    main()
