#!/usr/bin/env python3
"""A credentialed WebSocket whose server breaks the protocol is closed with 1002 and nothing of
the offending frame reaches the client: a masked server frame, a frame with RSV1 set (what
permessage-deflate sends when it was not negotiated), and a 101 that names an extension
vaultgate never offered. A message whose last byte could begin the secret is delivered at once
when it ends, not held for more data.

Why this can fail: a splice that passes server bytes through (or masks frame by frame) relays the
bad frame, or a compressed frame the masker cannot read; a masker that holds a possible prefix
until more bytes arrive stalls the message until the server sends again."""
import socket
import threading
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
# the upstream keeps each connection open until the case ends: a close or a message that came
# only when the upstream went away would never come while the case waits for it
release = threading.Event()
HOLD = ("call", lambda: release.wait(120))
EXT_101 = t.WS_101[:-2] + b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"


def handler(req, ci):
    if req.target == "/masked":
        return [t.WS_101, t.ws_frame(b"ok"),
                t.ws_frame(b"masked " + SECRET.encode(), mask_key=b"\x11\x22\x33\x44"),
                HOLD]
    if req.target == "/deflate":
        return [t.WS_101, t.ws_frame(b"ok"), t.ws_frame(b"\xf2\x48\xcd\xc9\xc9\x07\x00", rsv=0x40),
                HOLD]
    if req.target == "/ext101":
        return [EXT_101, t.ws_frame(b"never"), HOLD]
    if req.target == "/prefix":
        # one message in two frames; the final frame ends in the secret's first byte
        return [t.WS_101, t.ws_frame(b"part one ", fin=False), t.ws_frame(b"ends in s", op=0),
                HOLD]
    return [t.resp_bytes(404, b"no")]


def upgrade(vg, path):
    s = vg.tls_client("api.example.test", timeout=60)
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
    try:
        t.check(reader.frame() is None, "%s: more after the close" % path)
    except socket.timeout:
        t.fail("%s: connection not closed after 1002 (open while the upstream is)" % path)
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
    try:
        m = reader.message()
    except socket.timeout:
        t.fail("message held back waiting for more data (none came for 60 s)")
    t.check(m == (1, b"part one ends in s"), "message %r" % (m,))
    s.close()
finally:
    release.set()
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
