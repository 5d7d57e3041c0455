#!/usr/bin/env python3
"""The audit store end to end, on SQLite and PostgreSQL: tests/tools/audit_drive records blocked
hosts and routes from several threads, then `vaultgate audit ... --json` must show exact counts,
first_seen <= last_seen inside the recording window, rows ordered by host, and `source` turning
into `both` when a local-egress instance records the same hosts. On a PostgreSQL cluster this
case owns, the server is stopped mid-run and started again: no count may be lost.

PostgreSQL: VG_TEST_PG_URL (a throwaway database), or a cluster started here with
tests/services/pg.sh. Exit 77 (skip) only when PostgreSQL is not installed, after the SQLite part
has passed."""
import atexit
import datetime
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

from vgtest import free_port

SRC = os.environ.get("VG_SRC") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
BUILD = os.environ["VG_BUILD"]
VG_BIN = os.environ.get("VG_BIN") or os.path.join(BUILD, "cli", "vaultgate")
DRIVE = os.path.join(BUILD, "tests", "tools", "audit_drive")
PG_SH = os.path.join(SRC, "tests", "services", "pg.sh")
TAG = "it%d%d" % (os.getpid(), int(time.time()))  # run ids unique per invocation


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def ms(iso):
    dt = datetime.datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ")
    return int(dt.replace(tzinfo=datetime.timezone.utc).timestamp() * 1000 + 0.5)


def drive(store, run, threads, hosts, repeat, rounds, source="proxy", route="direct", prefix="h",
          interval_ms=0, stop_file=None):
    args = [DRIVE, "--store", store, "--run", run, "--user", "u-" + TAG, "--threads", str(threads),
            "--hosts", str(hosts), "--repeat", str(repeat), "--rounds", str(rounds),
            "--source", source, "--route", route, "--prefix", prefix,
            "--interval-ms", str(interval_ms)] + (["--stop-file", stop_file] if stop_file else [])
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(proc, timeout=60):
    out, err = proc.communicate(timeout=timeout)
    check(proc.returncode == 0, "audit_drive exit %s: %s" % (proc.returncode, err.strip()))
    lines = [json.loads(l) for l in out.splitlines() if l.strip()]
    done = lines[-1]
    check(done.get("done") is True, "audit_drive did not finish: %r" % lines[-1:])
    return lines, done


def audit_json(store, table, run):
    p = subprocess.run([VG_BIN, "audit", "--store", store, table, "--run", run, "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    check(p.returncode == 0, "vaultgate audit %s: exit %d: %s" % (table, p.returncode, p.stderr))
    rows = json.loads(p.stdout)
    check(isinstance(rows, list), "not a JSON array")
    return rows


def check_rows(rows, table, want_count, window, hosts, source=None):
    start_ms, end_ms = window
    keys = ({"user_id", "run_id", "host", "seen_count", "first_seen", "last_seen", "source"}
            if table == "blocked" else
            {"run_id", "host", "route", "count", "first_seen", "last_seen"})
    count_key = "seen_count" if table == "blocked" else "count"
    check([r["host"] for r in rows] == sorted(hosts), "%s: hosts/order %r" %
          (table, [r["host"] for r in rows][:5]))
    for r in rows:
        check(set(r) == keys, "%s: columns %r" % (table, sorted(r)))
        check(r[count_key] == want_count(r), "%s %s: count %r, want %r" %
              (table, r["host"], r[count_key], want_count(r)))
        check(start_ms <= ms(r["first_seen"]) <= ms(r["last_seen"]) <= end_ms,
              "%s %s: times %s..%s outside %d..%d" % (table, r["host"], r["first_seen"],
                                                     r["last_seen"], start_ms, end_ms))
        if source is not None:
            check(r["source"] == source(r), "%s: source %r" % (r["host"], r["source"]))


def exercise(store, label):
    """Counts, times, ordering and `both` on one store."""
    run = "r-%s-%s" % (label, TAG)
    threads, hosts, repeat, rounds = 4, 20, 5, 3
    per_host = threads * repeat * rounds
    names = ["h%04d.example" % i for i in range(hosts)]

    lines, done = finish(drive(store, run, threads, hosts, repeat, rounds))
    check(all(l.get("healthy") for l in lines[:-1]), "%s: store reported unhealthy" % label)
    window = (done["start_ms"], done["end_ms"])
    check_rows(audit_json(store, "blocked", run), "blocked", lambda r: per_host, window, names,
               source=lambda r: "proxy")
    check_rows(audit_json(store, "routes", run), "routes", lambda r: per_host, window, names)

    # A second enforcement point (local-egress) blocks five of the same hosts.
    _, done2 = finish(drive(store, run, 2, 5, 1, 1, source="local-egress", route="refused"))
    window = (done["start_ms"], done2["end_ms"])
    both = set(names[:5])
    check_rows(audit_json(store, "blocked", run), "blocked",
               lambda r: per_host + (2 if r["host"] in both else 0), window, names,
               source=lambda r: "both" if r["host"] in both else "proxy")
    routes = audit_json(store, "routes", run)
    refused = [r for r in routes if r["route"] == "refused"]
    direct = [r for r in routes if r["route"] == "direct"]
    check(len(direct) == hosts and len(refused) == 5, "%s: route rows %d/%d" %
          (label, len(direct), len(refused)))
    check(all(r["count"] == 2 for r in refused) and all(r["count"] == per_host for r in direct),
          "%s: route counts" % label)
    check(routes == sorted(routes, key=lambda r: (r["host"], r["route"])), "routes not ordered")

    # Another run's rows stay apart.
    other = audit_json(store, "blocked", "no-such-run-" + TAG)
    check(other == [], "%s: rows for an unknown run" % label)

    # The readable table: a header, one line per row, exit 0.
    p = subprocess.run([VG_BIN, "audit", "--store", store, "--run", run], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    check(p.returncode == 0, "table: exit %d %s" % (p.returncode, p.stderr))
    out = p.stdout.splitlines()
    check(out[0].split()[:3] == ["host", "source", "seen_count"], "table header %r" % out[0])
    check(len(out) == hosts + 2 and out[-1] == "(%d rows)" % hosts, "table rows %r" % out[-1])
    check(out[1].split()[0] == "h0000.example" and out[1].split()[1] == "both", "first row %r" %
          out[1])
    print("ok %s: %d hosts x %d counts, both on 5, ordering and times" % (label, hosts, per_host),
          flush=True)


def cli_errors(store_ok):
    p = subprocess.run([VG_BIN, "audit", "--store", "sqlite:/nonexistent/dir/audit.db"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    check(p.returncode == 1 and len(p.stderr.strip().splitlines()) == 1,
          "unreadable store: exit %d %r" % (p.returncode, p.stderr))
    check(not os.path.exists("/nonexistent/dir/audit.db"), "reader created a store")
    for bad in (["--bogus"], ["blocked", "routes"], ["--run"], ["--store", "mysql://x"]):
        p = subprocess.run([VG_BIN, "audit"] + bad, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
        check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1,
              "usage %r: exit %d %r" % (bad, p.returncode, p.stderr))
    p = subprocess.run([VG_BIN, "audit", "--help"], stdout=subprocess.PIPE, text=True)
    check(p.returncode == 0 and "usage: vaultgate audit" in p.stdout, "--help")
    p = subprocess.run([VG_BIN, "audit", "--store", "off", "routes", "--json"],
                       stdout=subprocess.PIPE, text=True)
    check(p.returncode == 0 and json.loads(p.stdout) == [], "off store")
    print("ok cli errors", flush=True)


def pg(*args):
    return subprocess.run(["sh", PG_SH] + list(args), stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, timeout=120)


def outage(store, pgdir, port):
    """Stop PostgreSQL while counts flow, start it again: every count must land. The rounds go
    on (up to 5 minutes) until the store is seen healthy again after the restart, then stop."""
    run = "r-outage-" + TAG
    threads, hosts, repeat, rounds = 3, 8, 2, 2000
    stop_file = os.path.join(pgdir, "drive.stop")
    proc = drive(store, run, threads, hosts, repeat, rounds, interval_ms=150, stop_file=stop_file)
    lines = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(l) for l in proc.stdout], daemon=True)
    reader.start()
    seen = []

    def next_line(timeout):
        l = json.loads(lines.get(timeout=timeout))
        seen.append(l)
        return l

    while next_line(60)["round"] < 4:
        pass
    p = pg("stop", pgdir)
    check(p.returncode == 0, "pg.sh stop: %s" % p.stderr)
    deadline = time.monotonic() + 60
    while next_line(60).get("healthy", True):
        check(time.monotonic() < deadline, "store never reported unhealthy while down")
    time.sleep(0.5)
    p = pg("start", pgdir, str(port))
    check(p.returncode == 0, "pg.sh start again: %s" % p.stderr)
    deadline = time.monotonic() + 120
    while not next_line(60).get("healthy", False):
        check(time.monotonic() < deadline, "never healthy again after the restart")
    open(stop_file, "w").close()
    proc.wait(timeout=120)
    reader.join(timeout=10)
    while not lines.empty():
        seen.append(json.loads(lines.get()))
    err = proc.stderr.read()
    check(proc.returncode == 0, "audit_drive exit %s: %s" % (proc.returncode, err))
    done = seen[-1]
    check(done.get("done") is True, "no final line")
    check(any(l.get("healthy") is False for l in seen), "outage not observed")
    check(any(l.get("healthy") is True for l in seen if l.get("round", 0) > 4 and
              seen.index(l) > [i for i, x in enumerate(seen) if x.get("healthy") is False][-1]),
          "never healthy again after the restart")
    names = ["h%04d.example" % i for i in range(hosts)]
    per_host = threads * repeat * done["rounds"]
    window = (done["start_ms"], done["end_ms"])
    check_rows(audit_json(store, "blocked", run), "blocked", lambda r: per_host, window, names)
    check_rows(audit_json(store, "routes", run), "routes", lambda r: per_host, window, names)
    down = sum(1 for l in seen if l.get("healthy") is False)
    print("ok postgresql outage: %d rounds reported unhealthy, all %d counts per host kept" %
          (down, per_host), flush=True)


def main():
    for path in (VG_BIN, DRIVE):
        check(os.access(path, os.X_OK), "missing %s" % path)
    tmp = os.environ.get("VG_CASE_TMP")
    if not tmp:
        tmp = tempfile.mkdtemp(prefix="vg-audit-store-")
        atexit.register(shutil.rmtree, tmp, True)

    exercise("sqlite:" + os.path.join(tmp, "audit.db"), "sqlite")
    cli_errors(True)

    url = os.environ.get("VG_TEST_PG_URL")
    pgdir = None
    if not url:
        # The server runs as the postgres user: its directory must be reachable by it.
        pgdir = tempfile.mkdtemp(prefix="vg-pg-")
        os.chmod(pgdir, 0o755)
        for _ in range(3):  # the port is reserved for this case; a failed start tries another
            port = free_port()
            p = pg("start", pgdir, str(port))
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
    try:
        exercise(url, "postgresql")
        p = subprocess.run([VG_BIN, "audit", "--store",
                            "postgresql://vg:topsecret@127.0.0.1:%d/x" % free_port()],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
        check(p.returncode == 1 and "topsecret" not in p.stderr and "***" in p.stderr,
              "unreachable postgresql: exit %d %r" % (p.returncode, p.stderr))
        if pgdir is not None:
            outage(url, pgdir, port)
        else:
            print("note: VG_TEST_PG_URL given; the outage check needs a cluster this case owns")
    finally:
        if pgdir is not None:
            pg("stop", pgdir)
            shutil.rmtree(pgdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
