#!/usr/bin/env python3
"""Reflection masking: an upstream that echoes the request cannot hand the secret back - raw,
base64 (basic) or percent-encoded (query) - in headers or body, identity or gzip/deflate coded
(decoded, masked, sent on without Content-Encoding); an unsupported coding answers 502; the
request asked for Accept-Encoding: identity."""
import base64
import gzip
import zlib
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"


def handler(req, ci):
    echo = req.raw_head + req.body
    if req.target.startswith("/gzip"):
        return [t.resp_bytes(200, gzip.compress(echo), [("Content-Encoding", "gzip")])]
    if req.target.startswith("/deflate"):
        return [t.resp_bytes(200, zlib.compress(echo), [("Content-Encoding", "deflate")])]
    if req.target.startswith("/br"):
        return [t.resp_bytes(200, b"xx", [("Content-Encoding", "br")])]
    if req.target.startswith("/split"):
        # the secret split across chunks and packets
        a, b = echo[:echo.index(SECRET.encode()) + 5], echo[echo.index(SECRET.encode()) + 5:]
        return [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-Echo: " +
                SECRET.encode() + b"\r\n\r\n", b"%x\r\n%s\r\n" % (len(a), a), ("sleep", 0.1),
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(b), b)]
    return [t.resp_bytes(200, echo, [("X-Echo-Auth", req.header("Authorization")[0])])]


vault = t.example_vault(
    secrets={"API_KEY": {"value": SECRET}, "GIT": {"value": "ghp_canaryGIT0042"}},
    rules=[{"host_pattern": "api.example.test", "secret": "API_KEY", "scheme": "bearer"},
           {"host_pattern": "git.example.test", "secret": "GIT", "scheme": "basic",
            "username": "x"}])
d, certs, up, vg = t.setup(names=("api.example.test", "git.example.test"), vault=vault,
                           handler=handler)
stars = b"*" * len(SECRET)
try:
    for path in ("/plain", "/gzip", "/deflate", "/split"):
        r = vg.request("api.example.test", b"GET " + path.encode() + b" HTTP/1.1\r\nHost: "
                       b"api.example.test\r\nAccept-Encoding: gzip, br\r\nConnection: close\r\n\r\n")
        t.check(r.status == 200, "%s: %r" % (path, r))
        whole = r.raw_head + r.body
        t.check(SECRET.encode() not in whole, "%s: secret reflected: %r" % (path, whole))
        t.check(stars in r.body, "%s: no mask in %r" % (path, r.body))
        t.check(b"Accept-Encoding: identity" in r.body, "%s: %r" % (path, r.body))
        t.check(r.header("Content-Encoding") is None, "%s: Content-Encoding kept" % path)
    t.check(SECRET.encode() in up.all_bytes(), "the injection did not happen (test broken)")
    # keep-alive: the masker is reused across requests on one connection
    s = vg.tls_client("api.example.test")
    buf = b""
    for path in (b"/plain", b"/split", b"/gzip", b"/plain"):
        s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
        r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
        t.check(r.status == 200 and SECRET.encode() not in r.raw_head + r.body and stars in r.body,
                "keep-alive %r: %r" % (path, r))
    s.close()
    r = vg.request("api.example.test", b"GET /br HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 502 and "http_response_content_coding" in (r.header("Proxy-Status") or ""),
            "br: %r" % r)
    r = vg.request("git.example.test", b"GET /plain HTTP/1.1\r\nHost: git.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    b64 = base64.b64encode(b"x:ghp_canaryGIT0042")
    whole = r.raw_head + r.body
    t.check(b64 not in whole and b"ghp_canaryGIT0042" not in whole, "basic reflected %r" % whole)
    t.check(b"Basic " + b"*" * len(b64) in r.body, "basic mask %r" % r.body)
finally:
    vg.stop()
    up.stop()
