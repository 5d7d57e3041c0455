#!/usr/bin/env python3
"""WebSocket: the upgrade request is forwarded with the secret injected (and without a
compression extension), the 101 is passed on, then bytes are spliced both ways as they come;
the secret echoed back by the upstream inside the stream reaches the client masked."""
import time
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"


def handler(req, ci):
    return [b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n",
            b"hello " + req.header("Authorization")[0].encode() + b"\n", ("raw_echo",)]


d, certs, up, vg = t.setup(handler=handler)
try:
    s = vg.tls_client("api.example.test")
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: api.example.test\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Version: 13\r\nSec-WebSocket-Extensions: permessage-deflate\r\n"
              b"Authorization: Bearer placeholder\r\n\r\n")
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, _, rest = buf.partition(b"\r\n\r\n")
    t.check(head.startswith(b"HTTP/1.1 101 ") and b"Upgrade: websocket" in head and
            b"Connection: " in head, "101 head %r" % head)
    while b"\n" not in rest:
        rest += s.recv(65536)
    t.check(rest.startswith(b"hello Bearer " + b"*" * len(SECRET)), "greeting %r" % rest)
    req = up.requests[0]
    t.check(req.header("Authorization") == ["Bearer " + SECRET], "not injected")
    t.check(req.header("Upgrade") == ["websocket"] and req.header("Sec-WebSocket-Key"),
            "upgrade fields %r" % req.fields)
    t.check(not req.header("Sec-WebSocket-Extensions"), "compression offered on a credentialed "
            "WebSocket")
    # spliced both ways, each message as it is sent
    for i in range(3):
        msg = b"frame-%d %s|" % (i, SECRET.encode() if i == 1 else b"x")
        t0 = time.monotonic()
        s.sendall(msg)
        got = b""
        while len(got) < len(msg):
            got += s.recv(65536)
        t.check(time.monotonic() - t0 < 1, "echo took too long")
        t.check(SECRET.encode() not in got and len(got) == len(msg), "echo %r" % got)
    s.close()
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
