#!/usr/bin/env python3
"""Every raw-byte rule of SPEC §4 (and the llhttp 8.1 leniencies it names): each request is
answered 400/405/431/501 with Proxy-Status, the connection is closed, and no complete request
reaches the upstream (head errors: nothing at all)."""
import time
import vgtest as t

H = b"Host: api.example.test\r\n"
CASES = [
    # (name, bytes, expected statuses)
    ("CR without LF in value", b"GET / HTTP/1.1\r\n" + H + b"X: a\rb\r\n\r\n", {400}),
    ("LF without CR", b"GET / HTTP/1.1\n" + H.replace(b"\r\n", b"\n") + b"\n", {400}),
    ("bare LF ends a field", b"GET / HTTP/1.1\r\n" + H + b"X: a\n\r\n", {400}),
    ("\\r\\n\\rX", b"GET / HTTP/1.1\r\n" + H + b"\rX: 1\r\n\r\n", {400}),
    ("head ends \\r\\n\\rX", b"GET / HTTP/1.1\r\n" + H + b"\r\rGET /x HTTP/1.1\r\n" + H +
     b"\r\n", {400}),
    ("obs-fold", b"GET / HTTP/1.1\r\n" + H + b"X: a\r\n b\r\n\r\n", {400}),
    ("obs-fold tab", b"GET / HTTP/1.1\r\n" + H + b"X: a\r\n\tb\r\n\r\n", {400}),
    ("bare CR after empty value", b"GET / HTTP/1.1\r\n" + H + b"X:\r\r\n\r\n", {400}),
    ("empty header name", b"GET / HTTP/1.1\r\n" + H + b": x\r\n\r\n", {400}),
    ("space in header name", b"GET / HTTP/1.1\r\n" + H + b"X Y: x\r\n\r\n", {400}),
    ("space before colon", b"GET / HTTP/1.1\r\n" + H + b"X : x\r\n\r\n", {400}),
    ("underscore in name", b"GET / HTTP/1.1\r\n" + H + b"X_Forwarded: x\r\n\r\n", {400}),
    ("NUL in value", b"GET / HTTP/1.1\r\n" + H + b"X: a\x00b\r\n\r\n", {400}),
    ("control in value", b"GET / HTTP/1.1\r\n" + H + b"X: a\x01b\r\n\r\n", {400}),
    ("DEL in value", b"GET / HTTP/1.1\r\n" + H + b"X: a\x7fb\r\n\r\n", {400}),
    ("non-ASCII in target", b"GET /\xc3\xa9 HTTP/1.1\r\n" + H + b"\r\n", {400}),
    ("non-ASCII in Host", b"GET / HTTP/1.1\r\nHost: api.example.test\xff\r\n\r\n", {400}),
    ("non-ASCII in Connection", b"GET / HTTP/1.1\r\n" + H + b"Connection: clos\xe9\r\n\r\n",
     {400}),
    ("non-ASCII in Content-Length", b"POST / HTTP/1.1\r\n" + H +
     b"Content-Length: 1\xb9\r\n\r\nx", {400}),
    ("HTTP/1.2", b"GET / HTTP/1.2\r\n" + H + b"\r\n", {400, 505}),
    ("HTTP/2.0", b"GET / HTTP/2.0\r\n" + H + b"\r\n", {400, 505}),
    ("HTTP/0.9 line", b"GET /\r\n\r\n", {400}),
    ("TE gzip, chunked", b"POST / HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", {400, 501}),
    ("TE identity", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: identity\r\n\r\n",
     {400, 501}),
    ("TE twice", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", {400}),
    ("TE on HTTP/1.0", b"POST / HTTP/1.0\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
     b"0\r\n\r\n", {400}),
    ("CL and TE", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 5\r\n"
     b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n", {400}),
    ("duplicate CL", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 1\r\n"
     b"Content-Length: 1\r\n\r\nx", {400}),
    ("CL list", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 1, 1\r\n\r\nx", {400}),
    ("CL +1", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: +1\r\n\r\nx", {400}),
    ("CL 01", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 01\r\n\r\nx", {400}),
    ("CL 17 digits", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 10000000000000000\r\n\r\n",
     {400}),
    ("CL hex", b"POST / HTTP/1.1\r\n" + H + b"Content-Length: 0x1\r\n\r\nx", {400}),
    ("no Host", b"GET / HTTP/1.1\r\n\r\n", {400}),
    ("two Host", b"GET / HTTP/1.1\r\n" + H + H + b"\r\n", {400}),
    ("Host userinfo", b"GET / HTTP/1.1\r\nHost: u@api.example.test\r\n\r\n", {400}),
    ("Host two values", b"GET / HTTP/1.1\r\nHost: api.example.test, a.test\r\n\r\n", {400}),
    ("Host with space", b"GET / HTTP/1.1\r\nHost: api.example .test\r\n\r\n", {400}),
    ("absolute-form userinfo", b"GET https://u:p@api.example.test/ HTTP/1.1\r\n" + H + b"\r\n",
     {400}),
    ("chunk line ends \\rX", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
     b"1\rX\r\nx\r\n0\r\n\r\n", {400}),
    ("bad chunk size", b"POST / HTTP/1.1\r\n" + H + b"Transfer-Encoding: chunked\r\n\r\n"
     b"zz\r\nx\r\n0\r\n\r\n", {400}),
    ("chunk extension over 4 KiB", b"POST / HTTP/1.1\r\n" + H +
     b"Transfer-Encoding: chunked\r\n\r\n1;" + b"e" * 5000 + b"\r\nx\r\n0\r\n\r\n", {400}),
    ("TRACE", b"TRACE / HTTP/1.1\r\n" + H + b"\r\n", {405}),
    ("CONNECT on a TLS listener", b"CONNECT api.example.test:443 HTTP/1.1\r\n" + H + b"\r\n",
     {400, 405}),
    ("unknown method", b"FOO / HTTP/1.1\r\n" + H + b"\r\n", {400, 501}),
    # (an h2c offer alone is ignored and served: test_upgrade_h2c)
    ("upgrade other than WebSocket", b"GET / HTTP/1.1\r\n" + H +
     b"Upgrade: TLS/1.0, h2c\r\nConnection: Upgrade\r\n\r\n", {501}),
    ("WebSocket upgrade on POST", b"POST /ws HTTP/1.1\r\n" + H +
     b"Upgrade: websocket\r\nConnection: Upgrade\r\nContent-Length: 1\r\n\r\nx", {501}),
    ("101 fields", b"GET / HTTP/1.1\r\n" + H + b"".join(b"X-%d: 1\r\n" % i for i in range(101))
     + b"\r\n", {431}),
    ("head over 64 KiB", b"GET / HTTP/1.1\r\n" + H + b"X: " + b"a" * (65 * 1024) + b"\r\n\r\n",
     {431}),
]

d, certs, up, vg = t.setup()
bad = []
try:
    for name, data, want in CASES:
        t0 = time.monotonic()
        out = vg.exchange("api.example.test", data, timeout=30)  # read until the close
        took = time.monotonic() - t0
        if not out:
            bad.append("%s: no response" % name)
            continue
        r, rest = t.parse_response(out)
        if r.status not in want:
            bad.append("%s: %d, wanted %s" % (name, r.status, sorted(want)))
        elif not (r.header("Proxy-Status") or "").startswith("vaultgate"):
            bad.append("%s: no Proxy-Status" % name)
        elif (r.header("Connection") or "").lower() != "close" or took > 25:
            bad.append("%s: connection not closed" % name)
        elif rest:
            bad.append("%s: bytes after the error response: %r" % (name, rest[:60]))
    t.check(not up.requests, "complete requests reached the upstream: %r" %
            [x.raw_head[:60] for x in up.requests])
    # every case but the chunk-extension one fails in the head: nothing may have been sent
    t.check(up.accepts <= 3, "upstream accepted %d connections" % up.accepts)
    # data after Connection: close is discarded, never forwarded
    out = vg.exchange("api.example.test", b"GET /a HTTP/1.1\r\n" + H + b"Connection: close\r\n"
                      b"\r\nGET /smuggled HTTP/1.1\r\n" + H + b"\r\n")
    r, rest = t.parse_response(out)
    t.check(r.status == 200 and rest == b"", "close: %r %r" % (r, rest))
    t.check(b"smuggled" not in up.all_bytes(), "bytes after Connection: close forwarded")
finally:
    vg.stop()
    up.stop()
if bad:
    t.fail("\n  ".join(["%d of %d cases wrong:" % (len(bad), len(CASES))] + bad))
t.log("%d malformed requests refused" % len(CASES))
