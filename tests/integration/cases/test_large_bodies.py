#!/usr/bin/env python3
"""8 MiB up (Content-Length and chunked) and 8 MiB down arrive intact (sha256), streamed with
backpressure on both sides."""
import os
import vgtest as t

SIZE = 8 * 1024 * 1024
BLOB = os.urandom(SIZE)


def handler(req, ci):
    if req.target == "/down":
        return [t.resp_bytes(200, BLOB)]
    return [t.resp_bytes(200, t.sha256(req.body).encode())]


d, certs, up, vg = t.setup(handler=handler)
try:
    s = vg.tls_client("api.example.test", timeout=60)
    s.sendall(b"POST /up HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: %d\r\n\r\n" % SIZE)
    s.sendall(BLOB)
    r, buf = t.parse_response(b"", reader=lambda: s.recv(1 << 20))
    t.check(r.body == t.sha256(BLOB).encode(), "upload (CL) digest: %r" % r.body)
    s.sendall(b"POST /up HTTP/1.1\r\nHost: api.example.test\r\nTransfer-Encoding: chunked\r\n\r\n")
    for i in range(0, SIZE, 1 << 20):
        part = BLOB[i:i + (1 << 20)]
        s.sendall(b"%x\r\n" % len(part) + part + b"\r\n")
    s.sendall(b"0\r\n\r\n")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(1 << 20))
    t.check(r.body == t.sha256(BLOB).encode(), "upload (chunked) digest: %r" % r.body)
    s.sendall(b"GET /down HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(1 << 20))
    t.check(len(r.body) == SIZE and t.sha256(r.body) == t.sha256(BLOB), "download digest")
    s.close()
    # through curl too
    p = vg.curl("api.example.test", "/down", ["-o", os.path.join(d, "down.bin")])
    t.check(p.returncode == 0, "curl: %s" % p.stderr.decode())
    with open(os.path.join(d, "down.bin"), "rb") as f:
        t.check(t.sha256(f.read()) == t.sha256(BLOB), "curl download digest")
finally:
    vg.stop()
    up.stop()
