#!/usr/bin/env python3
"""Server-sent events: each event reaches the client as it is sent, long before the stream
ends (no buffering; test_sse_nagle measures the Nagle delay); chunked framing is rebuilt cleanly
(extensions dropped) and the upstream's trailer follows the last chunk.

The upstream sends an event, then waits until the client has it before it sends the next (and
the end): an event that vaultgate held back for more data would never come, and the read's 60 s
deadline ends the case. No time is measured."""
import threading
import vgtest as t

EVENTS = 4
seen = [threading.Event() for _ in range(EVENTS)]


def handler(req, ci):
    acts = [b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"]
    for i in range(EVENTS):
        ev = b"data: event %d\n\n" % i
        acts += [b"%x;ext=1\r\n%s\r\n" % (len(ev), ev), ("call", lambda i=i: seen[i].wait(120))]
    acts.append(b"0\r\nX-Trailer: t\r\n\r\n")
    return acts


d, certs, up, vg = t.setup(handler=handler)
try:
    s = vg.tls_client("api.example.test", timeout=60)
    s.sendall(b"GET /stream HTTP/1.1\r\nHost: api.example.test\r\nAccept: text/event-stream\r\n\r\n")
    got = b""
    while not got.endswith(b"0\r\nX-Trailer: t\r\n\r\n"):
        try:
            d_ = s.recv(65536)
        except OSError as e:
            t.fail("event %d held back (%s): %r" % (got.count(b"data: event"), e, got))
        if not d_:
            break
        got += d_
        for i in range(min(got.count(b"data: event"), EVENTS)):
            seen[i].set()  # the client has it: the upstream may send the next
    t.check(got.count(b"data: event") == EVENTS, "events seen in %r" % got)
    r, rest = t.parse_response(got)
    t.check(r.body == b"".join(b"data: event %d\n\n" % i for i in range(EVENTS)),
            "body %r" % r.body)
    t.check(b"ext=1" not in got, "chunk extensions forwarded: %r" % got)
    # trailers reach an HTTP/1.1 client with the last chunk (SPEC §10: relayed where the
    # framing can carry them)
    t.check(got.endswith(b"\r\n0\r\nX-Trailer: t\r\n\r\n"), "trailer not relayed: %r" % got)
    s.close()
finally:
    for e in seen:
        e.set()
    vg.stop()
    up.stop()
