#!/usr/bin/env python3
"""Timeouts an operator sets (SPEC §2 --timeout, §4, §10): `--timeout NAME=SECONDS` is checked
(a wrong name, zero, a fraction or text exit 2 naming --timeout), shown in /v1/status, and takes
effect on both transports - a TLS handshake that never starts, an HTTP/1.1 head that never ends,
an HTTP/2 connection with no stream (GOAWAY NO_ERROR), an HTTP/2 header block left open
(GOAWAY PROTOCOL_ERROR), an HTTP/2 stream whose body stops (RST_STREAM on that stream only, the
connection serving on), and an upstream that never answers (504 on either transport).

Why this can fail: a timeout kept as a constant ignores the option; HTTP/2 with timers of its own
keeps an idle connection or a stalled stream forever.

Each 2 s timeout must fire after 1.5 s and within 8 s: room for a loaded machine under ASan, and
still well before what else would end the connection or stream (the defaults, 10 s and more,
or the 12 s response-head timeout set here for the body-idle stream)."""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import h2raw  # noqa: E402
import vgtest as t  # noqa: E402
from hyperframe.frame import HeadersFrame  # noqa: E402

HDRS = [(":method", "GET"), (":scheme", "https"), (":authority", "api.example.test")]

# ---- the option is checked ----------------------------------------------------------------
d = t.tmpdir()
for bad in ("head=0", "head=1.5", "head=x", "nope=3", "head", "head=86401", "=3"):
    p = subprocess.run([t.VG_BIN, "run", "--vault", "/nonexistent", "--timeout", bad],
                       capture_output=True, timeout=10)
    err = p.stderr.decode(errors="replace")
    t.check(p.returncode == 2, "--timeout %s: exit %d" % (bad, p.returncode))
    t.check("--timeout" in err and len(err.strip().splitlines()) == 1,
            "--timeout %s: not one line naming the option: %r" % (bad, err))


def handler(req, ci):
    if req.target.startswith("/never"):
        return [("sleep", 30)]
    return [t.resp_bytes(200, b"fine")]


d, certs, up, vg = t.setup(handler=handler, extra=(
    "--timeout", "handshake=2", "--timeout", "head=2", "--timeout", "idle=2",
    "--timeout", "body-idle=2", "--timeout", "response-head=12"))
try:
    st = vg.status()
    want = {"handshake": 2, "head": 2, "idle": 2, "body-idle": 2, "response-head": 12,
            "connect": 10, "upstream-handshake": 10}
    t.check(st.get("timeouts") == want, "status timeouts %r" % st.get("timeouts"))

    def closed_within(sock, lo, hi):
        start = time.monotonic()
        sock.settimeout(hi + 2)
        try:
            while sock.recv(4096):
                pass
        except (socket.timeout, OSError):
            pass
        took = time.monotonic() - start
        return lo <= took <= hi, took

    # a TLS handshake that never starts
    s = socket.create_connection(("127.0.0.1", vg.port))
    ok, took = closed_within(s, 1.5, 8)
    t.check(ok, "handshake timeout: closed after %.1fs" % took)
    s.close()

    # an HTTP/1.1 head that never ends
    s = vg.tls_client("api.example.test")
    s.sendall(b"GET / HTTP/1.1\r\nHost: api.example.test\r\nX-Slow: 1")
    ok, took = closed_within(s, 1.5, 8)
    t.check(ok, "HTTP/1.1 head timeout: closed after %.1fs" % took)
    s.close()

    # HTTP/1.1: the upstream never answers
    r = vg.request("api.example.test", b"GET /never HTTP/1.1\r\nHost: api.example.test\r\n\r\n",
                   timeout=60)
    t.check(r.status == 504, "HTTP/1.1 response-head timeout: %r" % r.status)

    # HTTP/2: no stream for the idle time -> GOAWAY NO_ERROR, closed
    c = h2raw.Conn(vg.port, vg.ca)
    start = time.monotonic()
    c.pump(lambda x: x.goaway is not None, timeout=10)
    took = time.monotonic() - start
    t.check(c.goaway == 0 and 1.5 <= took <= 8, "h2 idle: GOAWAY %r after %.1fs" % (c.goaway, took))
    c.pump(lambda x: x.closed, timeout=30)
    t.check(c.closed, "h2 idle: still open after GOAWAY")
    c.close()

    # HTTP/2: a header block left open -> GOAWAY PROTOCOL_ERROR
    c = h2raw.Conn(vg.port, vg.ca)
    c.pump(lambda x: False, timeout=0.3)  # the server's SETTINGS, acknowledged now: no frame
    block = c.h2.encoder.encode(HDRS + [(":path", "/open")])  # may come between the two parts
    c.raw(HeadersFrame(1, data=block[:3], flags=["END_STREAM"]).serialize())
    start = time.monotonic()
    c.pump(lambda x: x.goaway is not None, timeout=10)
    took = time.monotonic() - start
    t.check(c.goaway == 1 and took <= 8, "h2 head: GOAWAY %r after %.1fs" % (c.goaway, took))
    c.close()

    # HTTP/2: a stream whose request body stops -> that stream reset, the connection serves on
    c = h2raw.Conn(vg.port, vg.ca)
    stalled = c.request([(":method", "POST")] + HDRS[1:] + [(":path", "/upload")], body=b"part",
                        end=False)
    start = time.monotonic()
    # another request on the same connection keeps it from idling out
    sid = c.request(HDRS + [(":path", "/ok")])
    status, reset, body = c.outcome(sid)
    t.check(status == 200 and body == b"fine", "h2: a second stream not served: %r" % status)
    status, reset, body = c.outcome(stalled, timeout=10)
    took = time.monotonic() - start
    t.check(reset is not None and status is None and took <= 8,
            "h2 body-idle: stream %r status %r reset %r after %.1fs" % (stalled, status, reset,
                                                                       took))
    t.check(c.goaway is None, "h2 body-idle: the connection went away (%r)" % c.goaway)

    # HTTP/2: the upstream never answers -> 504 on that stream
    sid = c.request(HDRS + [(":path", "/never")])
    status, reset, body = c.outcome(sid, timeout=60)
    t.check(status == 504, "h2 response-head timeout: %r (reset %r)" % (status, reset))
    c.close()
finally:
    vg.stop()
    up.stop()
log = vg.stderr()
for reason in ("head_timeout", "idle_timeout"):
    t.check(reason in log, "no h2_goaway %s in the log" % reason)
