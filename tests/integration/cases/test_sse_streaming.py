#!/usr/bin/env python3
"""Server-sent events: each event reaches the client as it is sent, long before the stream
ends (no buffering, no Nagle delay); chunked framing is rebuilt cleanly (extensions dropped) and
the upstream's trailer follows the last chunk."""
import time
import vgtest as t

DELAY = 0.6


def handler(req, ci):
    acts = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"]
    for i in range(4):
        ev = b"data: event %d\n\n" % i
        acts += [b"%x;ext=1\r\n%s\r\n" % (len(ev), ev), ("sleep", DELAY)]
    acts.append(b"0\r\nX-Trailer: t\r\n\r\n")
    return acts


d, certs, up, vg = t.setup(handler=handler)
try:
    s = vg.tls_client("api.example.test")
    t0 = time.monotonic()
    s.sendall(b"GET /stream HTTP/1.1\r\nHost: api.example.test\r\nAccept: text/event-stream\r\n\r\n")
    got, first_at = b"", None
    arrivals = []
    while not got.endswith(b"0\r\nX-Trailer: t\r\n\r\n"):
        d_ = s.recv(65536)
        if not d_:
            break
        got += d_
        n = got.count(b"data: event")
        while len(arrivals) < n:
            arrivals.append(time.monotonic() - t0)
    total = time.monotonic() - t0
    t.check(len(arrivals) == 4, "events seen: %d in %r" % (len(arrivals), got))
    t.check(arrivals[0] < DELAY, "first event after %.3fs (stream took %.3fs)" %
            (arrivals[0], total))
    for i in range(1, 4):
        t.check(arrivals[i] - arrivals[i - 1] > DELAY * 0.5,
                "events bunched together: %r" % arrivals)
    r, rest = t.parse_response(got)
    t.check(r.body == b"".join(b"data: event %d\n\n" % i for i in range(4)), "body %r" % r.body)
    t.check(b"ext=1" not in got, "chunk extensions forwarded: %r" % got)
    # trailers reach an HTTP/1.1 client with the last chunk (SPEC §10: relayed where the
    # framing can carry them)
    t.check(got.endswith(b"\r\n0\r\nX-Trailer: t\r\n\r\n"), "trailer not relayed: %r" % got)
    s.close()
finally:
    vg.stop()
    up.stop()
