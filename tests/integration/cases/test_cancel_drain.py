#!/usr/bin/env python3
"""A client that goes away after its whole request went upstream does not cost the upstream
connection: vaultgate reads the rest of the response, drops it and pools the connection, so the
next request reuses it (the fake upstream counts accepts). A response body past the drain's
budget (64 KiB) closes the connection instead, and so does a request the client cut while its
body was still on the way; a drain under way when vaultgate stops ends with the worker."""
import time

import vgtest as t


def handler(req, ci):
    if req.target == "/slow":
        return [("sleep", 0.3), t.resp_bytes(200, b"late answer")]
    if req.target == "/slow-big":
        return [("sleep", 0.3), t.resp_bytes(200, b"x" * (256 * 1024))]
    return [t.resp_bytes(200, b"ok")]


def cancel(vg, request):
    """Sends request on a new client connection and closes it before the answer comes."""
    s = vg.tls_client("api.example.test")
    s.sendall(request)
    time.sleep(0.1)
    s.close()


def served(up, n):
    """Waits until the upstream saw n requests, then for the answer's sleep and the drain."""
    for _ in range(100):
        if len(up.requests) >= n:
            break
        time.sleep(0.05)
    t.check(len(up.requests) >= n, "upstream saw %d requests, wanted %d" % (len(up.requests), n))
    time.sleep(1.0)


def ok(vg):
    r = vg.request("api.example.test", b"GET /ok HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 200 and r.body == b"ok", "after a cancel: %r" % (r,))


d, certs, up, vg = t.setup(handler=handler)
try:
    cancel(vg, b"GET /slow HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    served(up, 1)
    ok(vg)
    t.check(up.accepts == 1, "cancelled small answer: %d upstream connections, wanted 1 (drained "
            "and pooled)" % up.accepts)

    cancel(vg, b"GET /slow-big HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    served(up, 3)
    ok(vg)
    t.check(up.accepts == 2, "cancelled large answer: %d upstream connections, wanted 2 (closed "
            "past the drain's budget)" % up.accepts)

    # a body announced but cut: the request never went out whole, the connection is cut
    cancel(vg, b"POST /slow HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: 100\r\n\r\n"
           b"partial")
    time.sleep(1.0)
    ok(vg)
    t.check(up.accepts == 3, "cut request body: %d upstream connections, wanted 3" % up.accepts)

    # a drain under way when vaultgate stops: its connection is closed with the worker
    cancel(vg, b"GET /slow HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    rc = vg.stop()
    t.check(rc == 0, "vaultgate stopped with %r while a response was draining" % (rc,))
finally:
    vg.stop()
    up.stop()
