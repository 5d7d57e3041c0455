#!/usr/bin/env python3
"""Server-sent events from an upstream that keeps Nagle's algorithm on (no TCP_NODELAY, as many
servers do) and writes the response head and the first event separately: the first event must
reach the client about as fast through vaultgate as directly. Nagle holds the event until the
head is acknowledged; a receiver that delays its ACK (40 ms on Linux, since it has nothing to
send back) turns that into a 40 ms stall per response. vaultgate acknowledges upstream data at
once while a response streams (TCP_QUICKACK, set once per response: every later read
acknowledges by itself). The case prints the median first-event delay both ways, a new client
connection per request; then a stream of small events 20 ms apart, each its own segment held by
Nagle until the one before is acknowledged, must arrive at about their pace.

Why this can fail: without quick ACKs the first event arrives ~40 ms late through vaultgate;
with the socket left in Linux's interactive mode after the first ACK, every later event would."""
import socket
import ssl
import statistics
import time
import vgtest as t

N = 15
TCP_QUICKACK = getattr(socket, "TCP_QUICKACK", 12)
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")
EVENT = b"data: first\n\n"


STREAM = 5  # events of /stream, 20 ms apart


def chunk(b):
    return b"%x\r\n%s\r\n" % (len(b), b)


def handler(req, ci):
    if req.target == "/stream":
        out = [HEAD]
        for i in range(STREAM):
            out += [("sleep", 0.02), chunk(b"data: %d\n\n" % i)]
        return out + [b"0\r\n\r\n"]
    # two writes: the head, then (no delay) the first event, then the end a bit later
    return [HEAD, chunk(EVENT), ("sleep", 0.05), b"0\r\n\r\n"]


def stream_lateness(s):
    """The latest of /stream's events on connection s: how long after the upstream wrote it (at
    20 ms x (i + 1) from the request) each event arrived, the largest, in seconds."""
    t0 = time.monotonic()
    s.sendall(b"GET /stream HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    got, late = b"", 0.0
    while b"0\r\n\r\n" not in got:
        x = s.recv(65536)
        t.check(x, "connection closed")
        got += x
        now = time.monotonic() - t0
        for i in range(STREAM):
            if b"data: %d\n" % i in x:
                late = max(late, now - 0.02 * (i + 1))
    t.check(got.count(b"data: ") == STREAM, "events lost: %r" % got)
    return late


def first_event_delays(connect, quick=False):
    """A new client connection per request (as curl makes); upstream connections of vaultgate
    are pooled, so they are in delayed-ACK mode after the first exchanges."""
    out = []
    for _ in range(N):
        s = connect()
        t0 = time.monotonic()
        s.sendall(b"GET /events HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
        got, first = b"", None
        while b"0\r\n\r\n" not in got:
            if quick:
                # the direct baseline acknowledges at once, as vaultgate must
                s.setsockopt(socket.IPPROTO_TCP, TCP_QUICKACK, 1)
            x = s.recv(65536)
            t.check(x, "connection closed")
            got += x
            if first is None and b"data: first" in got:
                first = time.monotonic() - t0
        s.close()
        out.append(first)
    return out


def direct_connect():
    raw = socket.create_connection((up.addr, up.port), timeout=10)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(raw, server_hostname="api.example.test")


d, certs, up, vg = t.setup(handler=handler)
try:
    # directly: a TLS client to the fake upstream, trusting the test CA
    ctx = ssl.create_default_context(cafile=certs["ca"])
    direct = first_event_delays(direct_connect, quick=True)
    through = first_event_delays(lambda: vg.tls_client("api.example.test"))
    t.log("through: " + " ".join("%.1f" % (x * 1e3) for x in through))
    md, mt = statistics.median(direct), statistics.median(through)
    t.log("first event: median %.1f ms directly, %.1f ms through vaultgate (max %.1f / %.1f)" %
          (md * 1e3, mt * 1e3, max(direct) * 1e3, max(through) * 1e3))
    t.check(mt < 0.025, "first event %.1f ms late through vaultgate (directly %.1f ms)" %
            (mt * 1e3, md * 1e3))
    # a stream on a pooled upstream connection: a 40 ms delayed ACK per event would hold each
    # event until the one before is acknowledged
    lates = []
    for _ in range(3):
        s = vg.tls_client("api.example.test")
        lates.append(stream_lateness(s))
        s.close()
    t.log("stream of %d events, the latest event late by: %s ms" %
          (STREAM, " ".join("%.1f" % (x * 1e3) for x in lates)))
    t.check(min(lates) < 0.012, "events held: one arrived %.1f ms late" % (min(lates) * 1e3))
finally:
    vg.stop()
    up.stop()
