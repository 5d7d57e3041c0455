#!/usr/bin/env python3
"""Runs the integration cases: every executable tests/integration/cases/test_*.py, one case per
file, each in its own process with a timeout. Exit status of a case: 0 pass, 77 skip, anything
else fail. Prints one line per case and the closing line `integration: N passed, N failed,
N skipped`; exits non-zero when a case failed or none ran.

Environment given to each case: VG_BIN (the vaultgate binary), VG_BUILD (the build dir),
VG_SRC (the source root), VG_CASE_TMP (a fresh temp dir), plus whatever the caller exported
(VG_TEST_DNS, VG_TEST_PG_URL)."""
import argparse
import concurrent.futures
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))


def run_case(path, env_base, timeout, keep):
    name = os.path.basename(path)[:-3]
    tmp = tempfile.mkdtemp(prefix="vg-" + name + "-")
    env = dict(env_base, VG_CASE_TMP=tmp)
    start = time.monotonic()
    try:
        proc = subprocess.run([sys.executable, path], env=env, cwd=tmp, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=timeout)
        code, out = proc.returncode, proc.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        code, out = -1, (e.stdout or b"").decode("utf-8", "replace") + "\n[timed out]"
    if not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return name, code, out, time.monotonic() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, help="meson build directory")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--keep", action="store_true", help="keep each case's temp dir")
    ap.add_argument("cases", nargs="*", help="case names (default: all)")
    args = ap.parse_args()

    build = os.path.abspath(args.build)
    env = dict(os.environ, VG_BUILD=build, VG_SRC=SRC,
               VG_BIN=os.path.join(build, "cli", "vaultgate"),
               PYTHONPATH=os.path.join(HERE, "lib"), PYTHONUNBUFFERED="1")
    casedir = os.path.join(HERE, "cases")
    paths = sorted(os.path.join(casedir, f) for f in os.listdir(casedir)
                   if f.startswith("test_") and f.endswith(".py"))
    if args.cases:
        wanted = set(args.cases)
        paths = [p for p in paths if os.path.basename(p)[:-3] in wanted]

    passed = failed = skipped = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_case, p, env, args.timeout, args.keep) for p in paths]
        for fut in concurrent.futures.as_completed(futures):
            name, code, out, secs = fut.result()
            if code == 0:
                passed += 1
                verdict = "PASS"
            elif code == 77:
                skipped += 1
                verdict = "SKIP"
            else:
                failed += 1
                verdict = "FAIL"
            print("%s %s (%.1fs)" % (verdict, name, secs), flush=True)
            if verdict != "PASS":
                for line in out.rstrip().splitlines()[-40:]:
                    print("    " + line)
    print("integration: %d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
