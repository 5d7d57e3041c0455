#!/usr/bin/env python3
"""TLS records that arrive together are all delivered at once, on both sides. vaultgate's TLS
contexts read ahead (one recv() takes every record the socket holds). Here every piece goes in a
TLS record of its own and the records of one step leave in one TCP write (TCP_CORK), then the
sender waits: three pipelined requests from the client; a response head and its body in 30
records (Content-Length and chunked) from the upstream, which then waits for the next request; a
WebSocket message in 8 frames of 8 records from the upstream. Each must reach the other side
whole within seconds, the credential injected and the secret masked as always.

Why this can fail: libevent 2.1 goes on reading a TLS bufferevent only while SSL_pending() (the
rest of the current record) is non-zero; records OpenSSL has read ahead wait until the socket
becomes readable again - which, with the sender waiting for an answer, is never."""
import socket
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
BODY = b"".join(b"%02d-" % i + b"x" * 96 for i in range(30))  # 30 pieces of 99 bytes
PIECES = [BODY[i:i + 99] for i in range(0, len(BODY), 99)]
CHUNKED = [b"%x\r\n%s\r\n" % (len(p), p) for p in PIECES] + [b"0\r\n\r\n"]
WS_MSG = b"hi " + SECRET.encode() + b" " + b"y" * 40


def handler(req, ci):
    if req.target == "/cl":
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY)
        return [("corked", [head] + PIECES)]
    if req.target == "/chunked":
        head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        return [("corked", [head] + CHUNKED)]
    if req.target == "/ws":
        frames = t.ws_frames(WS_MSG, 1, 8)
        return [t.WS_101, ("corked", [frames[i:i + 10] for i in range(0, len(frames), 10)])]
    return [t.resp_bytes(200, ("ok %s %s" % (req.target, req.header("authorization")[0]))
                         .encode())]


def responses(s, n, what):
    """n responses read from s (keep-alive): a stall is a failure, not a hang."""
    out, rest = [], b""
    try:
        for _ in range(n):
            r, rest = t.parse_response(rest, "GET", reader=lambda: s.recv(65536))
            out.append(r)
    except socket.timeout:
        t.fail("%s: stalled after %d of %d answers" % (what, len(out), n))
    except EOFError as e:
        t.fail("%s: closed: %s" % (what, e))
    return out


d, certs, up, vg = t.setup(handler=handler)
try:
    # 1. the client: three pipelined requests, a record each, in one TCP write
    s = vg.tls_client("api.example.test", timeout=5)
    reqs = [b"GET /p%d HTTP/1.1\r\nHost: api.example.test\r\nAuthorization: Bearer placeholder"
            b"\r\n\r\n" % i for i in range(3)]
    t.send_corked(s, reqs)
    rs = responses(s, 3, "pipelined requests sent together")
    for i, r in enumerate(rs):
        t.check(r.status == 200 and r.body == b"ok /p%d Bearer %s" % (i, b"*" * len(SECRET)),
                "answer %d: %r %r" % (i, r, r.body))
    s.close()
    # 2. the upstream: a head and its body in many records, one write, then silence
    for path in ("/cl", "/chunked"):
        s = vg.tls_client("api.example.test", timeout=5)
        s.sendall(b"GET %s HTTP/1.1\r\nHost: api.example.test\r\n\r\n" % path.encode())
        r = responses(s, 1, path + ": a body in records that came together")[0]
        t.check(r.status == 200 and r.body == BODY, "%s: %r %r" % (path, r, r.body[:200]))
        s.close()
    # 3. the upstream after a WebSocket upgrade: one message in frames and records sent together
    s = vg.tls_client("api.example.test", timeout=5)
    s.sendall(b"GET /ws HTTP/1.1\r\nHost: api.example.test\r\nUpgrade: websocket\r\n"
              b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
              b"Sec-WebSocket-Version: 13\r\nAuthorization: Bearer placeholder\r\n\r\n")
    buf = b""
    try:
        while b"\r\n\r\n" not in buf:
            x = s.recv(65536)
            t.check(x, "closed before the 101")
            buf += x
        head, _, rest = buf.partition(b"\r\n\r\n")
        t.check(head.startswith(b"HTTP/1.1 101 "), "101 expected: %r" % head)
        msg = t.WsReader(lambda: s.recv(65536), rest).message()
    except socket.timeout:
        t.fail("a WebSocket message in records that came together stalled")
    t.check(msg == (1, WS_MSG.replace(SECRET.encode(), b"*" * len(SECRET))),
            "WebSocket message %r" % (msg,))
    s.close()
    t.check(not up.errors, "upstream errors %r" % up.errors)
finally:
    vg.stop()
    up.stop()
