#!/usr/bin/env python3
"""A short soak (the CI cut of tests/bench/soak.sh): 20 000 requests, keep-alive and new TLS
connections mixed (credentialed, allowed and blocked hosts, audit on), with vaultgate's RSS
sampled throughout. No request fails, and RSS after the warm-up (the first quarter) grows by
less than max(4 MiB, 10 %). Under the suite's ASan pass vaultgate's quarantine is bounded here
so freed memory does not look like growth, and the stop checks LeakSanitizer is clean."""
import os
import threading
import time
import vgtest as t

TOTAL = int(os.environ.get("VG_SOAK_REQUESTS", "20000"))
KA_THREADS = 3  # plus one thread that opens a new TLS connection per request

asan = os.environ.get("ASAN_OPTIONS", "")
os.environ["ASAN_OPTIONS"] = (asan + ":" if asan else "") + \
    "quarantine_size_mb=16:thread_local_quarantine_size_kb=256"
names = ("api.example.test", "free.example.test", "blocked.example.test")
v = t.example_vault(hosts={"free.example.test": "allow", "blocked.example.test": "block"})
d, certs, up, vg = t.setup(names=names, vault=v, audit="sqlite", threads=2, log_level="warn")
lock = threading.Lock()
count = {"ok": 0, "err": 0, "done": 0, "new": 0}
errors = []
samples = []  # (requests done, rss KiB)
stop = threading.Event()


def rss_kib():
    for line in open("/proc/%d/status" % vg.proc.pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def req(host, close):
    return (b"GET /soak HTTP/1.1\r\nHost: " + host.encode() +
            b"\r\nAuthorization: Bearer placeholder\r\n" +
            (b"Connection: close\r\n" if close else b"") + b"\r\n")


def account(ok, what):
    with lock:
        count["done"] += 1
        if ok:
            count["ok"] += 1
        else:
            count["err"] += 1
            if len(errors) < 5:
                errors.append(what)
        return count["done"] < TOTAL


def keepalive(i):
    s = None
    n = 0
    while not stop.is_set():
        host = names[n % 3] if n % 7 == 0 else "api.example.test"
        n += 1
        want = 403 if host == "blocked.example.test" else 200
        try:
            if s is None:
                s = vg.tls_client(host)
                s.host = host
            if s.host != host:  # one host per TLS connection (SNI)
                s.close()
                s = vg.tls_client(host)
                s.host = host
            s.sendall(req(host, False))
            r, rest = t.parse_response(b"", reader=lambda: s.recv(65536))
            ok = r.status == want and not rest
            if r.header("Connection") == "close":
                s.close()
                s = None
        except Exception as e:  # noqa
            ok, r = False, e
            s = None
        if not account(ok, r):
            break
    if s is not None:
        s.close()


def newconn():
    n = 0
    while not stop.is_set():
        host = names[n % 3]
        n += 1
        want = 403 if host == "blocked.example.test" else 200
        count["new"] += 1
        try:
            r = vg.request(host, req(host, True))
            ok = r.status == want
        except Exception as e:  # noqa
            ok, r = False, e
        if not account(ok, r):
            break


def sampler():
    while not stop.is_set():
        samples.append((count["done"], rss_kib()))
        time.sleep(0.25)


try:
    ths = [threading.Thread(target=keepalive, args=(i,)) for i in range(KA_THREADS)]
    ths += [threading.Thread(target=newconn), threading.Thread(target=sampler)]
    t0 = time.monotonic()
    for th in ths:
        th.start()
    while count["done"] < TOTAL and time.monotonic() - t0 < 240:
        time.sleep(0.1)
    stop.set()
    for th in ths:
        th.join(30)
    secs = time.monotonic() - t0
    samples.append((count["done"], rss_kib()))
    t.check(count["err"] == 0, "%d failed requests, e.g. %r" % (count["err"], errors))
    t.check(count["done"] >= TOTAL, "only %d requests in %.0f s" % (count["done"], secs))
    warm = [s for s in samples if s[0] >= TOTAL // 4]
    t.check(len(warm) >= 3, "too few RSS samples after the warm-up: %r" % samples)
    base, peak = warm[0][1], max(s[1] for s in warm)
    table = " ".join("%d:%d" % s for s in samples[::max(1, len(samples) // 12)])
    t.log("%d requests in %.1f s (%d new connections); RSS KiB by requests: %s" %
          (count["done"], secs, count["new"], table))
    t.log("RSS after warm-up %d KiB, peak %d KiB, growth %d KiB" % (base, peak, peak - base))
    t.check(peak - base < max(4096, base // 10), "RSS grows after the warm-up: %d -> %d KiB"
            % (base, peak))
finally:
    stop.set()
    rc = vg.stop()  # checks the sanitizer reports (LeakSanitizer at exit) too
    up.stop()
t.check(rc == 0, "exit %s" % rc)
