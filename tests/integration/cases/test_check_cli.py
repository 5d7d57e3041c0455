#!/usr/bin/env python3
"""`vaultgate check` and `vaultgate hosts`: the example vault, --json, broken vaults with their
exact error lines and exit 3, /etc/hosts lines, a catch-all vault (exit 1), usage errors (exit
2), and canary secrets (value, env, file) that must never appear in any output."""
import json
import os
import subprocess
import sys
import tempfile

SRC = os.environ.get("VG_SRC") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
VG_BIN = os.environ.get("VG_BIN") or os.path.join(SRC, "build", "cli", "vaultgate")
EXAMPLE = os.path.join(SRC, "conf", "vault.example.json")
CATCHALL = os.path.join(SRC, "conf", "vault.catchall.example.json")

CANARY_VALUE = "CANARY-value-7d1e9f"
CANARY_ENV = "CANARY-env-52ab03"
CANARY_FILE = "CANARY-file-c4f0aa"
CANARIES = [CANARY_VALUE, CANARY_ENV, CANARY_FILE]

failures = []
outputs = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what, flush=True)


def run(*args, env=None):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([VG_BIN] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=e, timeout=30)
    out, err = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    outputs.append(out + err)
    return p.returncode, out, err


def loads(text, what):
    try:
        return json.loads(text)
    except ValueError:
        check(False, "%s: not one JSON object: %r" % (what, text[:200]))
        return {}


def write(d, name, text):
    path = os.path.join(d, name)
    with open(path, "w") as f:
        f.write(text)
    return path


def test_example():
    rc, out, err = run("check", "--vault", EXAMPLE)
    check(rc == 0, "check example: exit %d (%s)" % (rc, err.strip()))
    want = ("ok: %s\nmode: default\nrules: 4\nhost entries: 2\nsecrets: 4\nca: constrained\n"
            'rules[0]: "api.example.test" -> EXAMPLE_API_KEY (bearer); methods: any; paths: any\n'
            'rules[1]: "header.example.test" -> EXAMPLE_HEADER_KEY (header); methods: any; '
            'paths: any\n'
            'rules[2]: "git.example.test" -> EXAMPLE_GIT_TOKEN (basic); methods: any; paths: any\n'
            'rules[3]: "query.example.test" -> EXAMPLE_QUERY_KEY (query); methods: any; '
            'paths: any\n' % EXAMPLE)
    check(out == want, "check example output:\n%s" % out)
    check(err == "", "check example stderr: %r" % err)

    rc, out, err = run("check", "--vault", EXAMPLE, "--json")
    check(rc == 0, "check --json exit %d" % rc)
    o = loads(out, "check --json")
    check(out.count("\n") == 1, "--json prints one line")
    want = {"file": EXAMPLE, "valid": True, "error": None, "mode": "default",
            "mode_reason": "every designated host is an exact name or IP literal", "rules": 4,
            "host_entries": 2, "secrets": 4, "warnings": [], "notes": [], "ca": "constrained",
            "rule_scopes": [
                {"host_pattern": h, "secret": s, "scheme": k, "methods": None, "paths": None}
                for h, s, k in (("api.example.test", "EXAMPLE_API_KEY", "bearer"),
                                ("header.example.test", "EXAMPLE_HEADER_KEY", "header"),
                                ("git.example.test", "EXAMPLE_GIT_TOKEN", "basic"),
                                ("query.example.test", "EXAMPLE_QUERY_KEY", "query"))]}
    check(o == want, "--json object: %r" % o)

    rc, out, err = run("check", "--vault", CATCHALL)
    check(rc == 0, "check catch-all example: exit %d" % rc)
    check('mode: catch-all (host_policy.default is "block")\n' in out, "catch-all mode line")
    check("ca: unconstrained\n" in out, "catch-all ca line")
    check("note: CA unconstrained (catch-all routing)\n" in out, "catch-all note")
    check("warning: CA unconstrained" not in out, "catch-all routing is no warning")


def test_broken(d):
    cases = [
        ('{"version":1,"rules":[],"bogus":1}', "bogus: unknown field"),
        ('{"version":1,"secrets":{"A":{"value":"%s"}},"rules":[{"host_pattern":'
         '"api.example.com","secret":"A","scheme":"digest"}]}' % CANARY_VALUE,
         "rules[0].scheme: expected one of bearer, basic, header, query, sigv4"),
        ('{"version":1,"secrets":{"A":{"value":"%s\\r\\nX-Evil: 1"}}}' % CANARY_VALUE,
         "secrets.A.value: secret has a forbidden byte at offset %d (only visible ASCII and "
         "space; CR, LF, NUL and other controls are refused)" % len(CANARY_VALUE)),
        ('{"version":1,"secrets":{"A":{"value":"%s"}},"rules":[{"host_pattern":"*.com",'
         '"secret":"A","scheme":"bearer"}]}' % CANARY_VALUE,
         'rules[0].host_pattern: "*.com" is too broad for a rule: "*.com" matches a whole '
         'top-level domain'),
    ]
    for i, (text, msg) in enumerate(cases):
        path = write(d, "broken%d.json" % i, text)
        rc, out, err = run("check", "--vault", path)
        check(rc == 3, "broken %d: exit %d" % (i, rc))
        check(out == "", "broken %d: stdout %r" % (i, out))
        check(err == "error: %s: %s\n" % (path, msg), "broken %d: stderr %r" % (i, err))
        rc, out, err = run("check", "--vault", path, "--json")
        check(rc == 3, "broken %d --json: exit %d" % (i, rc))
        o = loads(out, "broken %d --json" % i)
        check(o.get("valid") is False and o.get("error") == msg and o.get("mode") is None,
              "broken %d --json: %r" % (i, o))
    rc, out, err = run("check", "--vault", os.path.join(d, "missing.json"))
    check(rc == 3 and err.endswith(": cannot read vault: No such file or directory\n"),
          "missing vault: %d %r" % (rc, err))


def test_hosts(d):
    rc, out, err = run("hosts", "--vault", EXAMPLE, "--proxy-ip", "10.231.0.1")
    check(rc == 0, "hosts: exit %d (%s)" % (rc, err))
    want = "".join("10.231.0.1 %s\n" % h for h in (
        "api.example.test", "header.example.test", "git.example.test", "query.example.test",
        "blocked.example.test"))
    check(out == want, "hosts output:\n%s" % out)
    # each name once, allow entries and IP literals never
    path = write(d, "hosts.json", json.dumps({
        "version": 1, "secrets": {"A": {"value": CANARY_VALUE}},
        "rules": [{"host_pattern": "API.example.test.", "secret": "A", "scheme": "bearer"},
                  {"host_pattern": "api.example.test", "secret": "A", "scheme": "bearer"},
                  {"host_pattern": "192.0.2.9", "secret": "A", "scheme": "bearer"}],
        "host_policy": {"hosts": {"api.example.test": "block", "pypi.org": "allow",
                                  "*.pythonhosted.org": "allow"}}}))
    rc, out, err = run("hosts", "--vault", path, "--proxy-ip", "[::1]")
    check(rc == 0, "hosts dedupe: exit %d" % rc)
    check(out == "::1 api.example.test\n", "hosts dedupe output: %r" % out)
    check("192.0.2.9 is an IP literal" in err, "hosts IP note: %r" % err)

    rc, out, err = run("hosts", "--vault", CATCHALL, "--proxy-ip", "10.231.0.1")
    check(rc == 1, "hosts catch-all: exit %d" % rc)
    check(out == "", "hosts catch-all stdout: %r" % out)
    check('needs catch-all routing (host_policy.default is "block")' in err,
          "hosts catch-all reason: %r" % err)


def test_usage():
    for args, needle in [
        (["check"], "missing required option --vault"),
        (["check", "--bogus"], "unknown option '--bogus'"),
        (["check", "--vault"], "option --vault needs a value"),
        (["check", "--vault", EXAMPLE, "extra"], "unexpected argument 'extra'"),
        (["hosts", "--vault", EXAMPLE], "missing required option --proxy-ip"),
        (["hosts", "--vault", EXAMPLE, "--proxy-ip", "example.com"],
         "'example.com' is not an IPv4 or IPv6 address"),
        (["hosts", "--vault", EXAMPLE, "--proxy-ip", "10.0.0.1", "--json"],
         "unknown option '--json'"),
    ]:
        rc, out, err = run(*args)
        check(rc == 2, "%s: exit %d" % (args, rc))
        check(err.count("\n") == 1 and needle in err, "%s: stderr %r" % (args, err))
        check(out == "", "%s: stdout %r" % (args, out))
    for cmd in ("check", "hosts"):
        rc, out, err = run(cmd, "--help")
        check(rc == 0 and out.startswith("usage: vaultgate %s" % cmd), "%s --help" % cmd)


def test_canaries(d):
    secret_file = write(d, "secret.txt", CANARY_FILE + "\n")
    env = {"VG_TEST_CANARY_ENV": CANARY_ENV}
    good = write(d, "canary.json", json.dumps({
        "version": 1, "run": {"id": "canary-run", "user": "u-1"},
        "secrets": {"V": {"value": CANARY_VALUE}, "E": {"env": "VG_TEST_CANARY_ENV"},
                    "F": {"file": secret_file}, "UNUSED": {"value": CANARY_VALUE}},
        "rules": [{"host_pattern": "v.example.test", "secret": "V", "scheme": "bearer"},
                  {"host_pattern": "e.example.test", "secret": "E", "scheme": "basic",
                   "username": "x-access-token"},
                  {"host_pattern": "f.example.test", "secret": "F", "scheme": "query",
                   "name": "key"}]}))
    rc, out, err = run("check", "--vault", good, env=env)
    check(rc == 0, "canary vault: exit %d (%s)" % (rc, err))
    check("warning: secret UNUSED is not used by any rule\n" in out, "unused warning: %r" % out)
    run("check", "--vault", good, "--json", env=env)
    run("hosts", "--vault", good, "--proxy-ip", "10.0.0.1", env=env)
    # broken variants with the canaries around the error
    bad = write(d, "canary-bad.json", json.dumps({
        "version": 1, "secrets": {"V": {"value": CANARY_VALUE + "\n"}}}))
    rc, out, err = run("check", "--vault", bad)
    check(rc == 3, "canary bad value: exit %d" % rc)
    bad2 = write(d, "canary-bad2.json", json.dumps({
        "version": 1, "secrets": {"V": {"value": CANARY_VALUE, "env": "X"}}}))
    run("check", "--vault", bad2, "--json")
    bad3 = write(d, "canary-bad3.json",
                 '{"version":1,"secrets":{"V":{"value":"%s"}},"x":"%s"}' % (CANARY_VALUE,
                                                                             CANARY_VALUE))
    run("check", "--vault", bad3)
    for o in outputs:
        for c in CANARIES:
            check(c not in o, "a canary secret appeared in the output")
    # the base64 and percent-encoded forms must not appear either
    check(not any("Q0FOQVJZ" in o for o in outputs), "a base64 form appeared in the output")


def main():
    if not os.access(VG_BIN, os.X_OK):
        print("SKIP: no vaultgate binary at %s" % VG_BIN)
        return 77
    with tempfile.TemporaryDirectory(dir=os.environ.get("VG_CASE_TMP")) as d:
        test_example()
        test_broken(d)
        test_hosts(d)
        test_usage()
        test_canaries(d)
    if failures:
        print("%d check(s) failed" % len(failures))
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
