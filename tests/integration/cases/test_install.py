#!/usr/bin/env python3
"""`meson install` into a DESTDIR (SPEC §11): the binary, vaultgate(8) and vaultgate-vault(5),
vaultgate.service, its sysusers.d user, bash completion and the example vaults land where
systemd, man and bash look for them.
- Both man pages render with `man -l` without a groff warning; vaultgate(8) names every command
  and every option each command's --help lists, vaultgate-vault(5) every field of the vault's
  schema tables in policy/vault*.c (so a new field without its documentation fails here).
- The unit: `systemd-analyze verify` passes (ExecStart pointed at the DESTDIR binary, the man
  pages on MANPATH) where systemd-analyze exists; it is Type=simple, reloads with SIGHUP, keeps
  its state in StateDirectory=vaultgate (0711), which vaultgate takes from $STATE_DIRECTORY
  (so ExecStart names no --state-dir; never the working directory), carries the sandboxing directives of SPEC §11, and `systemd-analyze security`
  rates it below 3.0.
- The completion script loads in bash and completes commands and options.
- The installed example vaults are valid (`vaultgate check`)."""
import os
import re
import shutil
import subprocess

import vgtest as t

BUILD = os.environ.get("VG_BUILD") or os.path.join(t.SRC, "build")


def sh(args, **kw):
    return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120,
                          **kw)


def find(root, suffix):
    for dp, _, fs in os.walk(root):
        for f in fs:
            p = os.path.join(dp, f)
            if p.endswith(suffix):
                return p
    return None


def render(page):
    r = sh(["man", "--warnings", "-l", page], env=dict(os.environ, MANWIDTH="100",
                                                         MAN_KEEP_FORMATTING="0"))
    t.check(r.returncode == 0, "man -l %s: %d %s" % (page, r.returncode, r.stderr.decode()))
    t.check(r.stderr == b"", "groff warnings for %s: %s" % (page, r.stderr.decode()))
    text = r.stdout.decode()
    return re.sub(r".\x08", "", text)  # overstrike (bold) of some man-db setups


def check_man(dest):
    m8 = find(dest, "/man8/vaultgate.8")
    m5 = find(dest, "/man5/vaultgate-vault.5")
    t.check(m8 and m5, "man pages not installed under %s" % dest)
    if not shutil.which("man"):
        t.log("note: man is not installed; pages not rendered")
        return
    text8 = render(m8)
    top = sh([t.VG_BIN, "help"]).stdout.decode()
    cmds = re.findall(r"^  (\w+) ", top, re.M)
    for c in cmds:
        t.check(re.search(r"^\s+%s$" % c, text8, re.M) or "vaultgate %s" % c in text8,
                "vaultgate(8) lacks the command %s" % c)
        usage = sh([t.VG_BIN, c, "--help"]).stdout.decode()
        for o in sorted(set(re.findall(r"--[a-z][a-z-]+", usage))):
            if o == "--help":
                continue
            t.check(o in text8, "vaultgate(8) lacks %s %s" % (c, o))
    for name in ("handshake", "upstream-handshake", "response-head", "body-idle", "enforcement",
                 "NPM_CONFIG_CAFILE", "JAVA_TOOL_OPTIONS", "WGETRC"):
        t.check(name in text8, "vaultgate(8) lacks %s" % name)
    text5 = render(m5)
    fields = set()
    for src in ("vault.c", "vault_rule.c", "vault_oauth.c"):
        with open(os.path.join(t.SRC, "policy", src)) as f:
            fields |= set(re.findall(r'\{"([a-z_]+)", (?:cJSON_|VAULT_BOOL)', f.read()))
    t.check(len(fields) >= 30, "vault fields found in policy/vault*.c: %r" % sorted(fields))
    for fld in sorted(fields):
        t.check(re.search(r"\b%s\b" % fld, text5), "vaultgate-vault(5) lacks the field %s" % fld)
    t.log("ok man pages: %d commands and their options, %d vault fields" % (len(cmds),
                                                                           len(fields)))


def check_unit(dest, bindir):
    unit = find(dest, "/systemd/system/vaultgate.service")
    t.check(unit, "vaultgate.service not installed")
    with open(unit) as f:
        text = f.read()
    t.check("@BINDIR@" not in text, "unsubstituted unit")
    want = ["Type=simple", "ExecReload=/bin/kill -HUP $MAINPID", "StateDirectory=vaultgate",
            "StateDirectoryMode=0711", "NoNewPrivileges=yes", "ProtectSystem=strict",
            "ProtectHome=yes", "PrivateTmp=yes", "CapabilityBoundingSet=CAP_NET_BIND_SERVICE",
            "LimitCORE=0", "ExecStart=%s/vaultgate run " % bindir]
    for w in want:
        t.check(w in text, "the unit lacks %r" % w)
    # every path the daemon writes is absolute: nothing lands in the working directory
    start = [l for l in text.splitlines() if l.startswith("ExecStart=")][0]
    for opt in ("--vault", "--ca-out"):
        t.check(re.search(r"%s /\S+" % opt, start), "ExecStart: %s not absolute" % opt)
    t.check("--state-dir" not in start, "ExecStart names --state-dir: $STATE_DIRECTORY is the "
            "state directory systemd made")
    sysusers = find(dest, "/sysusers.d/vaultgate.conf")
    t.check(sysusers, "sysusers.d file not installed")
    with open(sysusers) as f:
        t.check(re.search(r"^u vaultgate ", f.read(), re.M), "no vaultgate user in sysusers.d")
    if not shutil.which("systemd-analyze"):
        t.log("note: systemd-analyze is not installed; the unit is not verified")
        return
    d = os.path.join(t.tmpdir(), "unit")
    os.makedirs(d, exist_ok=True)
    copy = os.path.join(d, "vaultgate.service")
    with open(copy, "w") as f:
        f.write(text.replace("%s/vaultgate" % bindir, os.path.join(dest + bindir, "vaultgate")))
    man = os.path.dirname(os.path.dirname(find(dest, "/man8/vaultgate.8")))
    r = sh(["systemd-analyze", "verify", copy], env=dict(os.environ, MANPATH=man))
    t.check(r.returncode == 0 and r.stderr.strip() == b"", "systemd-analyze verify: %d %s" %
            (r.returncode, r.stderr.decode()))
    r = sh(["systemd-analyze", "security", "--offline=yes", copy])
    m = re.search(r"Overall exposure level for vaultgate.service: ([0-9.]+)", r.stdout.decode())
    t.check(m and float(m.group(1)) < 3.0, "systemd-analyze security: %r" %
            (m.group(1) if m else r.stdout[-300:]))
    t.log("ok unit: verified, exposure %s" % m.group(1))


def check_completion(dest):
    comp = find(dest, "/bash-completion/completions/vaultgate")
    t.check(comp, "bash completion not installed")
    script = ('source "$1"; COMP_WORDS=(vaultgate ru); COMP_CWORD=1; _vaultgate; '
              'echo "${COMPREPLY[*]}"; COMP_WORDS=(vaultgate run --time); COMP_CWORD=2; '
              '_vaultgate; echo "${COMPREPLY[*]}"; COMP_WORDS=(vaultgate trust --bu); '
              'COMP_CWORD=2; _vaultgate; echo "${COMPREPLY[*]}"')
    r = sh(["bash", "-c", script, "bash", comp])
    t.check(r.stdout.decode().splitlines() == ["run", "--timeout", "--bundle-out"],
            "completion: %r %r" % (r.stdout, r.stderr))
    # every option of every command is offered
    with open(comp) as f:
        text = f.read()
    for c in ("run", "check", "hosts", "nft", "probe", "audit", "trust"):
        usage = sh([t.VG_BIN, c, "--help"]).stdout.decode()
        for o in set(re.findall(r"--[a-z][a-z-]+", usage)):
            t.check(o in text, "completion lacks %s %s" % (c, o))
    t.log("ok bash completion")


def main():
    t.require_binary()
    if not os.path.exists(os.path.join(BUILD, "build.ninja")):
        t.skip("no meson build directory at %s" % BUILD)
    dest = os.path.join(t.tmpdir(), "dest")
    r = sh(["meson", "install", "-C", BUILD, "--no-rebuild", "--destdir", dest])
    t.check(r.returncode == 0, "meson install: %s %s" % (r.stdout.decode()[-800:],
                                                        r.stderr.decode()[-800:]))
    binary = find(dest, "/bin/vaultgate")
    t.check(binary and os.access(binary, os.X_OK), "no binary in %s" % dest)
    bindir = os.path.dirname(binary)[len(dest):]
    r = sh([binary, "version"])
    t.check(r.returncode == 0 and r.stdout.startswith(b"vaultgate "), "installed binary: %r" %
            r.stdout)
    for v in ("vault.example.json", "vault.catchall.example.json",
              "vault.providers.example.json"):
        p = find(dest, "/doc/vaultgate/" + v)
        t.check(p, "%s not installed" % v)
        env = dict(os.environ, OPENAI_API_KEY="sk-x", ANTHROPIC_API_KEY="sk-y",
                   GEMINI_API_KEY="g-z")
        r = sh([binary, "check", "--vault", p], env=env)
        t.check(r.returncode == 0, "check %s: %s" % (v, r.stderr.decode()))
    check_man(dest)
    check_unit(dest, bindir)
    check_completion(dest)


if __name__ == "__main__":
    main()
