#!/usr/bin/env python3
"""A graceful stop with HTTP/2 streams open (SPEC §10): SIGTERM sends GOAWAY (NO_ERROR, the last
stream id covering the streams under way), the streams under way finish with their whole
responses, an idle connection gets its GOAWAY and is closed at once, no new connection is
taken, and vaultgate exits 0 as soon as the last stream is done, not at the end of the grace
period (no grace_expired line).

Why this can fail: a stop that closes HTTP/2 connections at once cuts every stream in flight; one
that forgets to send GOAWAY leaves clients opening streams on a connection about to close."""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import h2raw  # noqa: E402
import vgtest as t  # noqa: E402

HDRS = [(":method", "GET"), (":scheme", "https"), (":authority", "api.example.test")]
BODY = b"slow answer " * 1000


class FrameReader:
    """Server frames off the socket: SETTINGS acknowledged, GOAWAY kept, each stream's status,
    body and reset code collected until every stream asked for has ended."""

    def __init__(self, s):
        import hpack
        self.s, self.buf, self.dec = s, b"", hpack.Decoder()

    def run(self, sids, timeout):
        from hyperframe.frame import Frame, SettingsFrame
        goaway, got, done = None, {}, set()
        deadline = time.monotonic() + timeout
        while not set(sids) <= done and time.monotonic() < deadline:
            while len(self.buf) >= 9:
                f, n = Frame.parse_frame_header(memoryview(self.buf[:9]))
                if len(self.buf) < 9 + n:
                    break
                f.parse_body(memoryview(self.buf[9:9 + n]))
                self.buf = self.buf[9 + n:]
                st, body, reset = got.get(f.stream_id, (None, b"", None))
                name = type(f).__name__
                if name == "SettingsFrame" and "ACK" not in f.flags:
                    self.s.sendall(SettingsFrame(0, flags=["ACK"]).serialize())
                elif name == "GoAwayFrame":
                    goaway = f
                elif name == "HeadersFrame":
                    hd = dict(self.dec.decode(f.data))
                    st = int(hd[":status"]) if st is None else st
                elif name == "DataFrame":
                    body += f.data
                elif name == "RstStreamFrame":
                    reset = f.error_code
                    done.add(f.stream_id)
                got[f.stream_id] = (st, body, reset)
                if "END_STREAM" in f.flags:
                    done.add(f.stream_id)
            self.s.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data = self.s.recv(65536)
            except OSError:
                break
            if not data:
                break
            self.buf += data
        return goaway, got


def handler(req, ci):
    if req.target.startswith("/slow"):
        return [("sleep", 1.5), t.resp_bytes(200, BODY)]
    return [t.resp_bytes(200, b"late")]


d, certs, up, vg = t.setup(handler=handler)
try:
    c = h2raw.Conn(vg.port, vg.ca)
    c2 = h2raw.Conn(vg.port, vg.ca)
    sids = [c.request(HDRS + [(":path", "/slow/%d" % i)]) for i in range(3)]
    t.check(t.wait_for(lambda: len(up.requests) == 3, 30), "the slow requests did not arrive")
    stop_at = time.monotonic()
    vg.proc.send_signal(signal.SIGTERM)
    # python-h2 closes its state machine at a GOAWAY and refuses the frames a graceful stop
    # still sends: from here the frames are read by hand (hyperframe, hpack)
    fr = FrameReader(c.s)
    goaway, got = fr.run(sids, timeout=60)
    t.check(goaway is not None and goaway.error_code == 0,
            "no GOAWAY NO_ERROR after SIGTERM: %r" % goaway)
    t.check(goaway is not None and goaway.last_stream_id >= max(sids),
            "GOAWAY does not cover the streams under way: %r" % goaway)
    for sid in sids:
        status, body, reset = got.get(sid, (None, b"", None))
        t.check(status == 200 and body == BODY and reset is None,
                "stream %d under way: status %r reset %r, %d bytes" % (sid, status, reset,
                                                                         len(body)))
    # an idle connection is told and closed at once; no new connection is taken
    c2.pump(lambda x: x.goaway is not None and x.closed, timeout=30)
    t.check(c2.goaway == 0 and c2.closed, "idle connection: GOAWAY %r closed %r" % (c2.goaway,
                                                                                   c2.closed))
    c2.close()
    try:
        h2raw.Conn(vg.port, vg.ca, timeout=2).close()
        t.check(False, "a new connection was accepted while stopping")
    except OSError:
        pass
    rc = vg.proc.wait(timeout=60)
    took = time.monotonic() - stop_at
    t.check(rc == 0, "vaultgate exit %r" % rc)
    t.check(not [e for e in vg.events("stop") if e.get("reason") == "grace_expired"],
            "exit %.1fs after SIGTERM: waited for the grace period" % took)
    c.close()
finally:
    if vg.proc.poll() is None:
        vg.stop()
    up.stop()
