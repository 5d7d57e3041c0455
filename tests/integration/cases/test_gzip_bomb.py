#!/usr/bin/env python3
"""A compression bomb on a credentialed response: the upstream ignores `identity` and answers a
small gzip body that inflates to hundreds of MiB. vaultgate decodes it (to mask it) only as fast
as the client reads: with several clients that read nothing, its memory stays bounded by the
per-connection output cap instead of growing by the decoded size. A client that does read gets
the whole decoded body, with the secret at its end masked.

Why this can fail: decoding each compressed read at once (deflate expands up to ~1000x) queues
megabytes of decoded output per connection whatever the client does; RSS then grows by about
16 MiB per connection per read of compressed input."""
import os
import time
import zlib
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
BIG = 300 << 20
SMALL = 24 << 20


def bomb(n):
    z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip wrapper
    zero = b"\0" * (1 << 20)
    out = [z.compress(zero) for _ in range(n >> 20)]
    out.append(z.compress(SECRET.encode()))
    out.append(z.flush())
    return b"".join(out)


BOMBS = {"/big": bomb(BIG), "/small": bomb(SMALL)}
if os.environ.get("ASAN_OPTIONS"):
    # under ASan freed memory waits in a quarantine (256 MiB): RSS would count it as live
    os.environ["ASAN_OPTIONS"] += ":quarantine_size_mb=0"


def handler(req, ci):
    body = BOMBS[req.target]
    return [t.resp_bytes(200, body, [("Content-Encoding", "gzip")]), ("sleep", 20)]


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


d, certs, up, vg = t.setup(handler=handler)
socks = []
try:
    t.log("compressed sizes: %d and %d bytes" % (len(BOMBS["/big"]), len(BOMBS["/small"])))
    base = rss_kib(vg.proc.pid)
    for _ in range(6):
        s = vg.tls_client("api.example.test")
        s.sendall(b"GET /big HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
        socks.append(s)
    peak = base
    for _ in range(30):
        time.sleep(0.1)
        peak = max(peak, rss_kib(vg.proc.pid))
    t.log("RSS %d KiB before, %d KiB peak with 6 clients not reading a %d MiB bomb" %
          (base, peak, BIG >> 20))
    t.check(up.accepts == 6, "the bombs were not all served (%d)" % up.accepts)
    t.check(peak - base < 24 * 1024, "RSS grew by %d KiB" % (peak - base))
    # a client that reads gets everything, decoded, the secret at the end starred
    s = vg.tls_client("api.example.test", timeout=60)
    s.sendall(b"GET /small HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n")
    raw = t.read_until_close(s)
    head, _, rest = raw.partition(b"\r\n\r\n")
    t.check(b"Content-Encoding" not in head, "still encoded: %r" % head)
    body = t.parse_response(raw)[0].body
    t.check(len(body) == SMALL + len(SECRET), "decoded %d bytes" % len(body))
    t.check(body.endswith(b"*" * len(SECRET)) and body.count(b"\0") == SMALL, "body not masked")
finally:
    for s in socks:
        s.close()
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
