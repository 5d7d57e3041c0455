#!/usr/bin/env python3
"""Slow-loris: 2000 connections that never finish - 1000 TLS handshakes held open after a
partial ClientHello record, 1000 plain-HTTP request heads trickled a byte at a time - do not stop
a normal client from being served while they are held, and cost vaultgate bounded memory per
connection. The handshake and head timeouts (10 s and 30 s by default, which end them
eventually) are raised to 300 s here: a normal request that waited for the slow connections to
end would not be answered within its 60 s, however slow the machine."""
import resource
import socket
import time
import vgtest as t

N_TLS, N_PLAIN = 1000, 1000
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard < N_TLS + N_PLAIN + 200:
    t.skip("RLIMIT_NOFILE hard limit %d is too low" % hard)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
d, certs, up, vg = t.setup(http=True, extra=["--timeout", "handshake=300", "--timeout",
                                             "head=300"])
REQ = b"GET /x HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n"
socks = []


def rss_kib():
    for line in open("/proc/%d/status" % vg.proc.pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def timed_request():
    t0 = time.monotonic()
    r = vg.request("api.example.test", REQ, timeout=60)
    return r, time.monotonic() - t0


try:
    vg.request("api.example.test", REQ)  # warm: leaf minted, upstream pooled
    rss0 = rss_kib()
    for i in range(N_TLS):
        s = socket.create_connection(("127.0.0.1", vg.port), timeout=30)
        s.sendall(b"\x16\x03\x01\x02\x00\x01")  # a record header and one byte of a ClientHello
        socks.append(s)
    plain = []
    for i in range(N_PLAIN):
        s = socket.create_connection(("127.0.0.1", vg.http_port), timeout=30)
        s.sendall(b"GET / HTTP/1.1\r\nHo")
        plain.append(s)
    socks += plain
    time.sleep(0.5)
    rss1 = rss_kib()
    worst = 0.0
    for rnd in range(5):
        for s in plain:  # keep trickling: one more byte each
            s.sendall(b"s")
        r, secs = timed_request()
        t.check(r.status == 200, "normal client: %r" % r)
        worst = max(worst, secs)
    t.log("2000 slow connections: worst normal request %.3f s; RSS %d -> %d KiB (%.1f KiB each)"
          % (worst, rss0, rss1, (rss1 - rss0) / (N_TLS + N_PLAIN)))
    t.check((rss1 - rss0) / (N_TLS + N_PLAIN) < 256, "memory per slow connection")
    t.check(vg.proc.poll() is None, "vaultgate died")
    # the slow ones are still held (not yet timed out), and nothing reached the upstream
    t.check(len(up.requests) == 6, "upstream saw %d requests" % len(up.requests))
finally:
    for s in socks:
        s.close()
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s" % rc)
