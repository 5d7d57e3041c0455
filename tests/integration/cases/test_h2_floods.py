#!/usr/bin/env python3
"""HTTP/2 abuse (SPEC §10): rapid reset (CVE-2023-44487), a CONTINUATION flood (CVE-2024-27316),
and floods of SETTINGS, PING, PRIORITY and empty DATA frames each get GOAWAY with
ENHANCE_YOUR_CALM and the connection closed - counted by vaultgate itself, since Debian's
nghttp2 1.52 stops rapid reset late and floods of the others not at all. More than 100
concurrent streams are refused. Nothing of the flood reaches the upstream, and another client
is served throughout.

Why this can fail: without vaultgate's own counters these clients keep one core busy for as long
as they like."""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import h2raw  # noqa: E402
import vgtest as t  # noqa: E402
from hyperframe.frame import (ContinuationFrame, DataFrame, HeadersFrame,  # noqa: E402
                              PingFrame, PriorityFrame, RstStreamFrame, SettingsFrame)

CALM = 11
HDRS = [(":method", "POST"), (":scheme", "https"), (":authority", "api.example.test"),
        (":path", "/f")]


def rapid_reset(c):
    for i in range(300):
        sid = c.request(HDRS, end=False)
        c.raw(RstStreamFrame(sid, error_code=8).serialize())


def continuation(c):
    block = c.h2.encoder.encode(HDRS)
    c.raw(HeadersFrame(1, data=block[:4], flags=[]).serialize())
    empty = ContinuationFrame(1, data=b"", flags=[]).serialize()
    for _ in range(20):
        c.raw(empty * 1000)


def settings(c):
    for _ in range(150):
        c.raw(SettingsFrame(0, settings={SettingsFrame.INITIAL_WINDOW_SIZE: 65535}).serialize())


def pings(c):
    for i in range(150):
        c.raw(PingFrame(0, opaque_data=i.to_bytes(8, "big")).serialize())


def priorities(c):
    for i in range(1100):
        c.raw(PriorityFrame(1 + 2 * (i % 50), depends_on=0, stream_weight=16).serialize())


def empty_data(c):
    sid = c.request(HDRS, end=False)
    for _ in range(1100):
        c.raw(DataFrame(sid, data=b"", flags=[]).serialize())


def served():
    p = subprocess.run(["curl", "-sS", "--http2", "--resolve",
                        "api.example.test:%d:127.0.0.1" % vg.port, "--cacert", vg.ca,
                        "https://api.example.test:%d/still" % vg.port], capture_output=True,
                       timeout=20)
    return p.returncode == 0 and p.stdout == b"fine"


d, certs, up, vg = t.setup(handler=lambda req, ci: [t.resp_bytes(200, b"fine")])
try:
    for name, flood in (("rapid reset", rapid_reset), ("CONTINUATION flood", continuation),
                        ("SETTINGS flood", settings), ("PING flood", pings),
                        ("PRIORITY flood", priorities), ("empty DATA flood", empty_data)):
        c = h2raw.Conn(vg.port, vg.ca)
        try:
            flood(c)
        except OSError:
            pass  # closed while still flooding
        c.pump(lambda x: x.goaway is not None or x.closed, timeout=5)
        t.check(c.goaway == CALM, "%s: GOAWAY %r (closed %r)" % (name, c.goaway, c.closed))
        c.pump(lambda x: x.closed, timeout=5)
        t.check(c.closed, "%s: the connection stayed open" % name)
        c.close()
        t.check(served(), "%s: another client not served" % name)
    t.check(all(r.target == "/still" for r in up.requests), "flood requests reached upstream: %r"
            % [r.target for r in up.requests][:5])
    # 100 concurrent streams at most
    c = h2raw.Conn(vg.port, vg.ca)
    c.pump(lambda x: False, timeout=0.5)  # the server's SETTINGS
    sids = [c.request(HDRS, end=False) for _ in range(100)]
    # the 101st sent raw: the client library keeps to the limit itself
    sids.append(sids[-1] + 2)
    c.raw(HeadersFrame(sids[-1], data=c.h2.encoder.encode(HDRS), flags=["END_HEADERS"]).serialize())
    c.pump(lambda x: any(getattr(e, "stream_id", None) == sids[-1] for e in x.events) or
           x.goaway is not None, timeout=5)
    refused = [e for e in c.events if type(e).__name__ == "StreamReset"]
    t.check(refused or c.goaway is not None, "101 streams open at once")
    c.close()
    t.check(served(), "not served after the stream cap")
finally:
    vg.stop()
    up.stop()
log = vg.stderr()
for reason in ("rapid_reset", "continuation_flood", "settings_flood", "ping_flood",
               "priority_flood", "empty_data_flood"):
    t.check(reason in log, "no %s line in the log" % reason)
