#!/usr/bin/env python3
"""`vaultgate audit suggest` (SPEC §12) on SQLite and PostgreSQL: tests/tools/audit_drive records
routes `reported` (as a report-only vault does: egress_route_log only), `refused` (with their
blocked_host_log rows) and `direct` for two runs, then suggest must print on stdout exactly the
fragment {"host_policy": {"hosts": {...}}} (most seen first; three names under one registrable
domain collapsed to `*.<domain>` with the sum; refusals counted once though they are in both
tables; `direct` never suggested), on stderr one line per host (host, count, route), honour
--run and --min-count, and need no vault. The fragment pasted into a block-default vault with a
rule passes `vaultgate check`. A store made before the route `reported` existed (the old CHECK
constraint) takes `reported` rows after vaultgate opens it, its old rows kept.

PostgreSQL: VG_TEST_PG_URL (a throwaway database), or a cluster started here with
tests/services/pg.sh. Exit 77 (skip) only when PostgreSQL is not installed, after the SQLite part
has passed.

Why this can fail: on a build without suggest the command is a usage error, and without the
`reported` route audit_drive cannot record one (the schema's CHECK refuses it)."""
import atexit
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.parse

from vgtest import free_port

SRC = os.environ.get("VG_SRC") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ["VG_BUILD"]
VG_BIN = os.environ.get("VG_BIN") or os.path.join(BUILD, "cli", "vaultgate")
DRIVE = os.path.join(BUILD, "tests", "tools", "audit_drive")
PG_SH = os.path.join(SRC, "tests", "services", "pg.sh")
TAG = "sg%d%d" % (os.getpid(), int(time.time()))  # run ids unique per invocation
OLD_ROUTES = ("CREATE TABLE egress_route_log (run_id {t} NOT NULL, host {t} NOT NULL,"
              " route {t} NOT NULL CHECK (route IN ('direct', 'tunnel', 'refused')),"
              " count {n} NOT NULL CHECK (count >= 0), first_seen {ts} NOT NULL,"
              " last_seen {ts} NOT NULL, PRIMARY KEY (run_id, host, route))")


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def drive(store, run, hosts, repeat, route, prefix, suffix, threads=1, blocked=1):
    p = subprocess.run([DRIVE, "--store", store, "--run", run, "--user", "u-" + TAG,
                        "--threads", str(threads), "--hosts", str(hosts), "--repeat",
                        str(repeat), "--route", route, "--prefix", prefix, "--suffix", suffix,
                        "--blocked", str(blocked)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode == 0, "audit_drive %s %s: exit %d: %s" % (route, prefix, p.returncode,
                                                                 p.stderr.strip()))


def suggest(store, *args):
    p = subprocess.run([VG_BIN, "audit", "--store", store, "suggest"] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30,
                       cwd=tempfile.gettempdir())
    check(p.returncode == 0, "suggest %r: exit %d: %s" % (args, p.returncode, p.stderr))
    try:
        frag = json.loads(p.stdout)
    except ValueError:
        fail("suggest %r: stdout is not JSON: %r" % (args, p.stdout[:300]))
    check(list(frag) == ["host_policy"] and list(frag["host_policy"]) == ["hosts"],
          "suggest %r: not a host_policy fragment: %r" % (args, frag))
    hosts = frag["host_policy"]["hosts"]
    check(set(hosts.values()) <= {"allow"}, "suggest %r: %r" % (args, hosts))
    return frag, list(hosts), p.stderr.splitlines()


def exercise(store, label, tmp):
    ra, rb = "ra-%s-%s" % (label, TAG), "rb-%s-%s" % (label, TAG)
    # three names under example.test, 2 threads x 2 each: 4 per host, 12 under *.example.test
    drive(store, ra, 3, 2, "reported", "h", "cdn.example.test", threads=2)
    drive(store, ra, 1, 5, "reported", "api", "pypi.org")
    drive(store, ra, 2, 1, "refused", "r", "example.net")  # blocked_host_log too: counted once
    # forwarded as allowed: not suggested
    drive(store, ra, 1, 9, "direct", "d", "example.com", blocked=0)
    drive(store, rb, 1, 3, "reported", "other", "example.org")

    frag, keys, lines = suggest(store, "--run", ra)
    check(keys == ["*.example.test", "api0000.pypi.org", "r0000.example.net",
                   "r0001.example.net"], "%s: keys %r" % (label, keys))
    check(lines == ["h0000.cdn.example.test 4 reported under *.example.test",
                    "h0001.cdn.example.test 4 reported under *.example.test",
                    "h0002.cdn.example.test 4 reported under *.example.test",
                    "api0000.pypi.org 5 reported",
                    "r0000.example.net 1 refused",
                    "r0001.example.net 1 refused"], "%s: stderr %r" % (label, lines))
    _, keys, lines = suggest(store, "--run", ra, "--min-count", "2")
    check(keys == ["*.example.test", "api0000.pypi.org"], "%s: --min-count 2: %r" % (label, keys))
    check(lines[-2:] == ["r0000.example.net 1 refused below --min-count",
                         "r0001.example.net 1 refused below --min-count"], "%r" % lines)
    _, keys, _ = suggest(store, "--run", ra, "--min-count", "5")
    check(keys == ["api0000.pypi.org"], "%s: --min-count 5: %r" % (label, keys))
    _, keys, _ = suggest(store, "--run", rb)
    check(keys == ["other0000.example.org"], "%s: --run %s: %r" % (label, rb, keys))
    _, keys, _ = suggest(store, "--run", "no-such-run-" + TAG)
    check(keys == [], "%s: unknown run: %r" % (label, keys))
    _, keys, _ = suggest(store)
    check({"*.example.test", "other0000.example.org"} <= set(keys), "%s: every run %r" %
          (label, keys))

    # pasted into a vault (block default, a rule) the fragment is valid
    vault = {"version": 1, "secrets": {"API_KEY": {"value": "sk-canary-SECRET-suggest-01"}},
             "rules": [{"host_pattern": "api.example.test", "secret": "API_KEY",
                        "scheme": "bearer"}],
             "host_policy": {"default": "block", "hosts": {"evil.example": "block"}}}
    vault["host_policy"]["hosts"].update(frag["host_policy"]["hosts"])
    path = os.path.join(tmp, "vault-%s.json" % label)
    with open(path, "w") as f:
        json.dump(vault, f)
    os.chmod(path, 0o600)
    p = subprocess.run([VG_BIN, "check", "--vault", path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    check(p.returncode == 0, "%s: pasted fragment: check exit %d: %s %s" %
          (label, p.returncode, p.stdout, p.stderr))
    print("ok %s: collapse, --min-count, --run, paste into a vault" % label, flush=True)


def old_sqlite(path):
    db = sqlite3.connect(path)
    db.execute(OLD_ROUTES.format(t="TEXT", n="INTEGER", ts="TEXT"))
    db.execute("CREATE TABLE blocked_host_log (user_id TEXT NOT NULL, run_id TEXT NOT NULL,"
               " host TEXT NOT NULL, seen_count INTEGER NOT NULL CHECK (seen_count >= 0),"
               " first_seen TEXT NOT NULL, last_seen TEXT NOT NULL, source TEXT NOT NULL CHECK"
               " (source IN ('proxy', 'local-egress', 'both')),"
               " PRIMARY KEY (user_id, run_id, host))")
    db.execute("INSERT INTO egress_route_log VALUES ('old-%s', 'kept.example', 'refused', 7,"
               " '2026-01-01T00:00:00.000Z', '2026-01-01T00:00:00.000Z')" % TAG)
    db.commit()
    db.close()


def migrated(store, label):
    drive(store, "new-" + TAG, 1, 2, "reported", "m", "example.test")
    _, keys, lines = suggest(store, "--run", "old-" + TAG)
    check(keys == ["kept.example"] and lines == ["kept.example 7 refused"],
          "%s: old rows after migration %r %r" % (label, keys, lines))
    _, keys, _ = suggest(store, "--run", "new-" + TAG)
    check(keys == ["m0000.example.test"], "%s: reported rows in a migrated store %r" %
          (label, keys))
    print("ok %s: a store with the old route constraint takes `reported`" % label, flush=True)


def pg(*args):
    return subprocess.run(["sh", PG_SH] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)


def psql(url, sql):
    p = subprocess.run(["psql", "-v", "ON_ERROR_STOP=1", "-q", url, "-c", sql],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    check(p.returncode == 0, "psql: %s" % p.stderr.strip())


def with_search_path(url, schema):
    opt = "options=" + urllib.parse.quote("-csearch_path=" + schema)
    return url + ("&" if "?" in url else "?") + opt


def main():
    for path in (VG_BIN, DRIVE):
        check(os.access(path, os.X_OK), "missing %s" % path)
    tmp = os.environ.get("VG_CASE_TMP")
    if not tmp:
        tmp = tempfile.mkdtemp(prefix="vg-audit-suggest-")
        atexit.register(shutil.rmtree, tmp, True)

    old = os.path.join(tmp, "old.db")
    old_sqlite(old)
    # reading never changes a store: one made before `reported` is read as it is
    _, keys, _ = suggest("sqlite:" + old)
    check(keys == ["kept.example"], "old store read as it is: %r" % keys)
    exercise("sqlite:" + os.path.join(tmp, "audit.db"), "sqlite", tmp)
    migrated("sqlite:" + old, "sqlite")
    p = subprocess.run([VG_BIN, "audit", "suggest", "--json"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    check(p.returncode == 2, "suggest --json: exit %d" % p.returncode)

    url = os.environ.get("VG_TEST_PG_URL")
    pgdir = None
    if not url:
        pgdir = tempfile.mkdtemp(prefix="vg-pg-")
        os.chmod(pgdir, 0o755)
        for _ in range(3):  # the port is reserved for this case; a failed start tries another
            p = pg("start", pgdir, str(free_port()))
            if p.returncode in (0, 77):
                break
        if p.returncode == 77:
            shutil.rmtree(pgdir, ignore_errors=True)
            print("SKIP: PostgreSQL is not installed (SQLite part passed)")
            return 77
        if p.returncode != 0:
            pg("stop", pgdir)
            shutil.rmtree(pgdir, ignore_errors=True)
            fail("pg.sh start: %s" % p.stderr.strip())
        url = p.stdout.strip().splitlines()[-1]
    schema = "vg_old_" + TAG
    try:
        exercise(url, "postgresql", tmp)
        psql(url, "CREATE SCHEMA %s; CREATE TABLE %s.%s" %
             (schema, schema, OLD_ROUTES.format(t="text", n="bigint", ts="timestamptz")[13:]) +
             "; INSERT INTO %s.egress_route_log VALUES ('old-%s', 'kept.example', 'refused', 7,"
             " now(), now())" % (schema, TAG))
        migrated(with_search_path(url, schema), "postgresql")
    finally:
        if pgdir is not None:
            pg("stop", pgdir)
            shutil.rmtree(pgdir, ignore_errors=True)
        else:
            psql(url, "DROP SCHEMA IF EXISTS %s CASCADE" % schema)
    return 0


if __name__ == "__main__":
    sys.exit(main())
