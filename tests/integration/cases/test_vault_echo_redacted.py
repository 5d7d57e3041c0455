#!/usr/bin/env python3
"""A credential pasted into the wrong field of a vault is never printed back (SPEC §3): every
value an error or warning echoes passes through the redactor. Four credential-shaped canaries
(an OpenAI project key, a GitHub token, an AWS access key id, a long random token), each put
into every field that an error echoes (a secret file path, a rule's secret name, a host
pattern, a host_policy entry, a secret name, an env variable name, an unknown field name), and
into fields that are valid either way. `vaultgate check` (text and --json), `vaultgate run`
(its one stderr line) and a failed SIGHUP reload (the /v1/status warning and the log) must
never show a canary, in any letter case, and must still name the JSON path."""
import json
import os
import random
import signal
import string
import subprocess
import vgtest as t

t.require_binary()
d = t.tmpdir()
rnd = random.SystemRandom()


def randtok(n, alphabet=string.ascii_letters + string.digits):
    while True:
        s = "".join(rnd.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in s) and any(c.isupper() for c in s) and \
                (alphabet != string.ascii_letters + string.digits or
                 any(c.islower() for c in s)):
            return s


CANARIES = [
    "sk-proj-" + randtok(24),
    "ghp_" + randtok(36),
    "AKIA" + randtok(16, string.ascii_uppercase + string.digits),
    randtok(40),
]


def base():
    return {"version": 1, "run": {"id": "run-echo", "user": "u-1"},
            "secrets": {"A": {"value": "plain-value-1"}},
            "rules": [{"host_pattern": "api.example.test", "secret": "A", "scheme": "bearer"}]}


def field_vaults(c):
    """(name, vault, JSON path the error must name, or None when the vault may be valid)."""
    out = []

    def add(name, path, edit):
        v = base()
        edit(v)
        out.append((name, v, path))

    add("file", "secrets.A.file", lambda v: v["secrets"].update(A={"file": c}))
    add("file path", "secrets.A.file",
        lambda v: v["secrets"].update(A={"file": "/run/vg-none/" + c}))
    add("rule secret", "rules[0].secret", lambda v: v["rules"][0].update(secret=c))
    add("wildcard", "rules[0].host_pattern",
        lambda v: v["rules"][0].update(host_pattern="*." + c))
    add("regex", "rules[0].host_pattern",
        lambda v: v["rules"][0].update(host_pattern="re:" + c + "("))
    add("host entry", "host_policy.hosts[\"",
        lambda v: v.update(host_policy={"hosts": {c: "maybe"}}))
    add("env name", "secrets.A.env", lambda v: v["secrets"].update(A={"env": c}))
    add("unknown field", "[\"", lambda v: v.update({c: 1}))
    add("unknown rule field", "rules[0][\"", lambda v: v["rules"][0].update({c: "x"}))
    # valid or not depending on the canary's characters: never printed either way
    add("secret name", None, lambda v: v["secrets"].update({c: {"value": "plain-value-2"}}))
    add("header name", None, lambda v: v["rules"][0].update(scheme="header", name=c))
    return out


def run(*args):
    p = subprocess.run([t.VG_BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=30)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def clean(text, c, what):
    t.check(c.lower() not in text.lower(), "%s shows the canary: %r" % (what, text))


def write(path, v):
    with open(path, "w") as f:
        json.dump(v, f)
    os.chmod(path, 0o600)


cases = []
for c in CANARIES:
    for name, v, jpath in field_vaults(c):
        path = os.path.join(d, "v%d.json" % len(cases))
        write(path, v)
        cases.append((c, name, path, jpath))

for c, name, path, jpath in cases:
    what = "%s (%s...)" % (name, c[:6])
    rc, out, err = run("check", "--vault", path)
    clean(out + err, c, "check, " + what)
    if jpath is not None:
        t.check(rc == 3 and err.startswith("error: %s: %s" % (path, jpath)),
                "check, %s: exit %d %r" % (what, rc, err))
    rc, out, err = run("check", "--vault", path, "--json")
    clean(out + err, c, "check --json, " + what)
    o = json.loads(out)
    if jpath is not None:
        t.check(rc == 3 and o["valid"] is False and o["error"].startswith(jpath),
                "check --json, %s: exit %d %r" % (what, rc, o))
        rc, out, err = run("run", "--vault", path, "--state-dir", os.path.join(d, "var-x"),
                           "--admin", "127.0.0.1:%d" % t.free_port(), "--audit", "off")
        clean(out + err, c, "run, " + what)
        t.check(rc == 3 and err.count("\n") == 1 and
                err.startswith("vaultgate run: %s: %s" % (path, jpath)), "run, %s: exit %d %r" %
                (what, rc, err))
for c in CANARIES:  # a command-line usage error echoes what it refuses, redacted
    rc, out, err = run("check", "--vault", os.path.join(d, "v0.json"), c)
    clean(out + err, c, "a usage error")
    t.check(rc == 2 and "unexpected argument" in err, "usage error: %d %r" % (rc, err))
t.log("check, check --json, run and usage errors: %d vaults, no canary shown" % len(cases))

# A failed reload: the status warning names the path, never the canary.
good = os.path.join(d, "good.json")
write(good, base())
vg = t.Vaultgate(os.path.join(d), good)
vg.start()
try:
    def reload_warning():
        return [w for w in vg.status()["warnings"] if w.startswith("vault reload failed")]

    for c, name, path, jpath in cases:
        if jpath is None:
            continue
        with open(path) as src:
            text = src.read()
        write(good, base())
        vg.proc.send_signal(signal.SIGHUP)
        t.check(t.wait_for(lambda: not reload_warning()), "a good reload left a warning")
        with open(good, "w") as f:
            f.write(text)
        vg.proc.send_signal(signal.SIGHUP)
        t.check(t.wait_for(reload_warning), "no reload warning for %s" % name)
        st, body = vg.admin_get("/v1/status")
        clean(body.decode(), c, "status after a reload of " + name)
        w = reload_warning()[0]
        t.check(("the previous policy stays: " + jpath) in w, "%s: warning %r" % (name, w))
    write(good, base())
finally:
    rc = vg.stop()
t.check(rc == 0, "exit %s" % rc)
for c in CANARIES:
    clean(vg.stderr(), c, "the log")
t.check('"reason":"vault_invalid"' in vg.stderr(), "no vault_invalid log lines")
t.log("reload: the status warning and the log name the path, never the canary")
