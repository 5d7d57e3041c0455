#!/usr/bin/env python3
"""WebSocket: the upgrade request is forwarded with the secret injected (and without a
compression extension), the 101 is passed on, then frames flow both ways as they come. The
upstream echoes the credentialed upgrade request as ONE message cut into 3-byte frames (one
payload byte each): the client gets every frame header as sent and the secret masked across the
frames. Messages the client sends come back echoed in 1-byte frames, masked by message.

Why this can fail: masking each frame alone lets a secret cut across frame boundaries through;
re-framing, dropping or delaying frames breaks the comparison with the exact expected frames."""
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"


def handler(req, ci):
    echo = req.raw_head  # the upgrade request as the upstream got it, secret included
    return [t.WS_101, t.ws_frames(echo, 1, 1), ("ws_echo", 1)]


def masked(b):
    return b.replace(SECRET.encode(), b"*" * len(SECRET))


d, certs, up, vg = t.setup(handler=handler)
try:
    s = vg.tls_client("api.example.test")
    s.sendall(t.ws_upgrade_request("api.example.test",
                                   b"Sec-WebSocket-Extensions: permessage-deflate\r\n"
                                   b"Authorization: Bearer placeholder\r\n"))
    buf = b""
    while b"\r\n\r\n" not in buf:
        x = s.recv(65536)
        t.check(x, "closed before the 101")
        buf += x
    head, _, rest = buf.partition(b"\r\n\r\n")
    t.check(head.startswith(b"HTTP/1.1 101 ") and b"Upgrade: websocket" in head and
            b"Connection: " in head, "101 head %r" % head)
    req = up.requests[0]
    t.check(req.header("Authorization") == ["Bearer " + SECRET], "not injected")
    t.check(req.header("Upgrade") == ["websocket"] and req.header("Sec-WebSocket-Key"),
            "upgrade fields %r" % req.fields)
    t.check(not req.header("Sec-WebSocket-Extensions"), "compression offered on a credentialed "
            "WebSocket")
    reader = t.WsReader(lambda: s.recv(65536), rest)
    # the echo of the upgrade request: exactly the upstream's 3-byte frames, secret starred
    want = t.ws_frames(masked(req.raw_head), 1, 1)
    got = b""
    while len(got) < len(want):
        f = reader.frame()
        t.check(f is not None, "closed during the echoed request (%d of %d bytes)" %
                (len(got), len(want)))
        t.check(len(f[5]) == 3, "frame of %d bytes, the upstream sent 3" % len(f[5]))
        got += f[5]
    t.check(got == want, "echoed request differs from the upstream's frames, masked")
    t.check(b"Bearer " + b"*" * len(SECRET) in got.replace(b"\x00\x01", b"").replace(b"\x01\x01",
            b"").replace(b"\x80\x01", b""), "the secret was not starred in place")
    # messages from the client, echoed in 1-byte frames, each delivered whole as it ends
    for i in range(3):
        msg = b"frame-%d %s|" % (i, SECRET.encode() if i == 1 else b"x")
        s.sendall(t.ws_frame(msg, 1, mask_key=b"\x01\x02\x03\x04"))
        m = reader.message()  # a message held for more data would time out: none is sent
        t.check(m is not None, "closed during echo %d" % i)
        t.check(m == (1, masked(msg)), "echo %d: %r" % (i, m))
    s.sendall(t.ws_frame(b"\x03\xe8", 8, mask_key=b"abcd"))
    m = reader.message()
    t.check(m == (8, b"\x03\xe8"), "close echo %r" % (m,))
    s.close()
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
