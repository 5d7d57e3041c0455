#!/usr/bin/env python3
"""A credentialed WebSocket whose server breaks the protocol is closed with 1002 and nothing of
the offending frame reaches the client: a masked server frame, a frame with RSV1 set (what
permessage-deflate sends when it was not negotiated), and a 101 that names an extension
vaultgate never offered. A message whose last byte could begin the secret is delivered at once
when it ends, not held for more data.

Why this can fail: a splice that passes server bytes through (or masks frame by frame) relays the
bad frame, or a compressed frame the masker cannot read; a masker that holds a possible prefix
until more bytes arrive stalls the message until the server sends again."""
import time
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
EXT_101 = t.WS_101[:-2] + b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"


def handler(req, ci):
    if req.target == "/masked":
        return [t.WS_101, t.ws_frame(b"ok"),
                t.ws_frame(b"masked " + SECRET.encode(), mask_key=b"\x11\x22\x33\x44"),
                ("sleep", 3)]
    if req.target == "/deflate":
        return [t.WS_101, t.ws_frame(b"ok"), t.ws_frame(b"\xf2\x48\xcd\xc9\xc9\x07\x00", rsv=0x40),
                ("sleep", 3)]
    if req.target == "/ext101":
        return [EXT_101, t.ws_frame(b"never"), ("sleep", 3)]
    if req.target == "/prefix":
        # one message in two frames; the final frame ends in the secret's first byte
        return [t.WS_101, t.ws_frame(b"part one ", fin=False), t.ws_frame(b"ends in s", op=0),
                ("sleep", 5)]
    return [t.resp_bytes(404, b"no")]


def upgrade(vg, path):
    s = vg.tls_client("api.example.test")
    s.sendall(t.ws_upgrade_request("api.example.test", b"Authorization: Bearer placeholder\r\n")
              .replace(b"GET /ws ", b"GET " + path.encode() + b" "))
    buf = b""
    while b"\r\n\r\n" not in buf:
        x = s.recv(65536)
        t.check(x, "%s: closed before the 101" % path)
        buf += x
    head, _, rest = buf.partition(b"\r\n\r\n")
    t.check(head.startswith(b"HTTP/1.1 101 "), "%s: %r" % (path, head))
    return s, head, t.WsReader(lambda: s.recv(65536), rest)


def expect_close_1002(reader, path, before=()):
    for want in before:
        f = reader.frame()
        t.check(f is not None and f[4] == want, "%s: frame %r, wanted %r" % (path, f, want))
    f = reader.frame()
    t.check(f is not None, "%s: no close frame" % path)
    t.check(f[2] == 8 and f[4][:2] == b"\x03\xea", "%s: %r instead of close 1002" % (path, f))
    t0 = time.monotonic()
    t.check(reader.frame() is None, "%s: more after the close" % path)
    t.check(time.monotonic() - t0 < 2, "%s: connection not closed after 1002" % path)
    t.check(b"masked" not in reader.buf and SECRET.encode() not in reader.buf, path)


d, certs, up, vg = t.setup(handler=handler)
try:
    for path in ("/masked", "/deflate"):
        s, head, reader = upgrade(vg, path)
        expect_close_1002(reader, path, before=(b"ok",))
        s.close()
    s, head, reader = upgrade(vg, "/ext101")
    t.check(b"sec-websocket-extensions" not in head.lower(), "extension passed on: %r" % head)
    expect_close_1002(reader, "/ext101")
    s.close()
    s, head, reader = upgrade(vg, "/prefix")
    t0 = time.monotonic()
    m = reader.message()
    took = time.monotonic() - t0
    t.log("message ending in a secret's first byte arrived after %.3f s" % took)
    t.check(m == (1, b"part one ends in s"), "message %r" % (m,))
    t.check(took < 1.5, "message held back %.1f s waiting for more data" % took)
    s.close()
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
