#!/usr/bin/env python3
"""Interim responses (1xx) reach HTTP/1.1 clients only: an upstream that sends 103 Early Hints
before its 200 has both relayed to an HTTP/1.1 client, and only the 200 to an HTTP/1.0 client
(RFC 9110 §15.2: a 1.0 client would take the 103 for the final answer).

Why this can fail: relaying every 1xx whatever the client's version hands an HTTP/1.0 client a
103 head it reads as the response, with the real 200 left over as garbage."""
import vgtest as t

EARLY = b"HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\n\r\n"


def handler(req, ci):
    return [EARLY, t.resp_bytes(200, b"final", [("X-Req-Version", req.version)])]


d, certs, up, vg = t.setup(handler=handler)
try:
    raw = vg.exchange("api.example.test", b"GET /h HTTP/1.0\r\nHost: api.example.test\r\n\r\n")
    t.check(raw.startswith(b"HTTP/1.1 200 "), "HTTP/1.0 client got %r" % raw[:60])
    t.check(b" 103 " not in raw and b"Early Hints" not in raw, "1xx relayed to HTTP/1.0: %r" % raw)
    t.check(raw.endswith(b"final"), "body %r" % raw[-20:])
    raw = vg.exchange("api.example.test", b"GET /h HTTP/1.1\r\nHost: api.example.test\r\n"
                      b"Connection: close\r\n\r\n")
    t.check(raw.startswith(b"HTTP/1.1 103 Early Hints\r\n"), "HTTP/1.1 client: %r" % raw[:60])
    t.check(b"\r\n\r\nHTTP/1.1 200 " in raw and raw.endswith(b"final"), "then the 200: %r" % raw)
finally:
    vg.stop()
    up.stop()
