#!/usr/bin/env python3
"""An HTTP/2 upstream (SPEC §10 "Upstream") behind vaultgate, reached from an h2 client and from
an HTTP/1.1 client: the injected field is byte-exact in the h2 header block the upstream
decodes (bearer: `authorization`, sent never-indexed; query: the parameter in `:path`), the
client's own credential gone; a request body arrives whole, also when its last bytes fill what
vaultgate holds for the stream while the upstream's window is shut; upstream trailers reach an
h2 client as trailers and an HTTP/1.1 client as chunked trailers, masked; a secret echoed in response
headers, in DATA cut across frames and in trailers is masked for both; an upstream RST_STREAM
in the middle of a response leaves the client with a failed stream (h2) or a cut chunked body
(HTTP/1.1), never a clean end, while the h2 client's connection and the upstream connection
stay usable; after an upstream GOAWAY new requests go over a new connection, and a request the
GOAWAY refused (a stream above its last stream id) is sent again there; an upstream that is
not reachable is 502 with Proxy-Status, for each of several requests queued on the same dial.
Request log lines and egress_route_log rows count as for HTTP/1.1, and the secrets never reach
vaultgate's log, at debug level.

Why this can fail: a translation that keeps the HTTP/1.1 head's Host or hop-by-hop fields, or
indexes the secret in HPACK, shows in the decoded header block; a proxy that drops trailers or
ends a reset stream cleanly hands the client a truncated answer as if whole; one that keeps
using a connection after GOAWAY, or gives up on the refused stream, fails requests the server
never saw; a failed dial that only its own request hears of leaves the queued ones hanging."""
import os
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import h2.events  # noqa: E402
import h2.exceptions  # noqa: E402
import h2raw  # noqa: E402
import hpack  # noqa: E402
import vgtest as t  # noqa: E402
from h2server import H2Answer, H2Upstream  # noqa: E402

SECRET = "sk-canary-SECRET-api-0001"
QSECRET = "qk canary/QUERY+5555"
QENC = "qk%20canary%2FQUERY%2B5555"
STARS = "*" * len(SECRET)
b_seen = threading.Event()


def handler(r):
    path = r.header(":path")[0]
    auth = (r.header("authorization") or [""])[0]
    if path.startswith("/echo"):
        # the secret in a header, cut across two DATA frames, and in a trailer
        cut = len(auth) // 2
        return H2Answer(200, [("content-type", "text/plain"), ("x-echo", auth)],
                        [b"head " + auth[:cut].encode(), auth[cut:].encode() + b" tail"],
                        trailers=[("x-trailer-echo", auth), ("x-sum", "abc123")])
    if path.startswith("/body"):
        return H2Answer(200, [("content-length", str(len(r.body)))], [r.body])
    if path.startswith("/trailers"):
        return H2Answer(200, [("content-type", "text/plain")], [b"hello ", b"world"],
                        trailers=[("x-checksum", "abc"), ("x-auth-echo", auth)])
    if path.startswith("/reset"):
        return H2Answer(200, [("content-type", "text/plain")],
                        [b"partial", ("sleep", 0.3), ("reset", 2)])
    if path.startswith("/early"):
        return H2Answer(200, [("content-length", "5")], [b"early"])
    if path.startswith("/slow"):
        return H2Answer(200, [], [b"first", ("sleep", 3), b"never read"])
    if path.startswith("/goaway"):
        return H2Answer(200, [], [b"conn=%d" % r.conn], goaway=True)
    if path.startswith("/hold-a"):
        b_seen.wait(10)  # B is open on this connection too: the GOAWAY below refuses it
        return H2Answer(200, [], [b"A conn=%d" % r.conn], goaway=True)
    if path.startswith("/hold-b") and not b_seen.is_set():
        b_seen.set()
        time.sleep(1.0)  # no head before A's GOAWAY: B stays unprocessed
        return H2Answer(200, [], [b"B first try conn=%d" % r.conn])
    return H2Answer(200, [("content-type", "text/plain")], [b"conn=%d %s" % (r.conn,
                                                                            path.encode())])


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test", "query.example.test", "down.example.test",
                        "shut.example.test"])
up = H2Upstream(certs["cert"], certs["key"], handler,
                early=lambda r: r.header(":path")[0].startswith("/early"))
# every stream's window shut for half a second: a request body piles up in vaultgate first
shut = H2Upstream(certs["cert"], certs["key"], lambda r: H2Answer(200, [], [b"got %d" %
                                                                             len(r.body)]),
                  hold_window=0.5)
vault = t.example_vault(
    secrets={"API_KEY": {"value": SECRET}, "Q_KEY": {"value": QSECRET}},
    rules=[{"host_pattern": "api.example.test", "secret": "API_KEY", "scheme": "bearer"},
           {"host_pattern": "query.example.test", "secret": "Q_KEY", "scheme": "query",
            "name": "key"},
           {"host_pattern": "down.example.test", "secret": "API_KEY", "scheme": "bearer"}],
    hosts={"shut.example.test": "allow"})
# down.example.test: a loopback address where nothing listens
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"], audit="sqlite", log_level="debug",
                 pins=[up.pin("api.example.test"), up.pin("query.example.test"),
                       shut.pin("shut.example.test"), "down.example.test:443:127.0.0.1"]).start()


def h1(host, head, body=b""):
    """One HTTP/1.1 request (Connection: close) over TLS; -> the raw bytes of the answer."""
    return vg.exchange(host, head.replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n", 1)
                       + body)


def h2req(c, path, host="api.example.test", method="GET", extra=(), body=None):
    return c.request([(":method", method), (":scheme", "https"), (":authority", host),
                      (":path", path)] + list(extra), body=body)


def trailers_of(c, sid):
    for ev in c.events:
        if isinstance(ev, h2.events.TrailersReceived) and ev.stream_id == sid:
            return list(ev.headers)
    return None


def headers_of(c, sid):
    for ev in c.events:
        if isinstance(ev, h2.events.ResponseReceived) and ev.stream_id == sid:
            return list(ev.headers)
    return None


def last_request(path):
    for r in reversed(up.requests):
        if r.header(":path")[0].startswith(path):
            return r
    t.fail("the upstream never saw %s" % path)


def check_block(what, host, target, fields):
    """The header block the upstream decoded for the last request to target: exactly the
    pseudo-fields of a GET, then fields. -> the request."""
    r = last_request(target.partition("?")[0])
    want = [(":method", "GET"), (":scheme", "https"), (":authority", host),
            (":path", target)] + fields
    t.check(r.headers == want, "%s, upstream header block:\n%r\nwanted:\n%r" %
            (what, r.headers, want))
    return r


completed = {"api.example.test": 0, "query.example.test": 0}
try:
    # ---- injection, byte-exact in the header block the upstream decodes ----------------------
    out = h1("api.example.test", b"GET /v1/x?q=1 HTTP/1.1\r\nHost: api.example.test\r\n"
             b"Authorization: Bearer placeholder\r\nX-Custom: One\r\nTE: trailers\r\n"
             b"Keep-Alive: 5\r\n\r\n")
    r, _ = t.parse_response(out)
    t.check(r.status == 200 and r.body == b"conn=0 /v1/x?q=1", "h1 client: %r" % r)
    completed["api.example.test"] += 1
    got = check_block("h1 client", "api.example.test", "/v1/x?q=1",
                      [("authorization", "Bearer " + SECRET), ("x-custom", "One"),
                       ("accept-encoding", "identity")])
    t.check(all(isinstance(h, hpack.NeverIndexedHeaderTuple) for h in got.headers),
            "a field of a credentialed request was indexable: %r" %
            [type(h).__name__ for h in got.headers])

    c = h2raw.Conn(vg.port, vg.ca)
    sid = h2req(c, "/v2/y", extra=[("authorization", "Bearer placeholder"),
                                   ("x-custom", "two"), ("accept-encoding", "gzip")])
    st, rst, body = c.outcome(sid)
    t.check(st == 200 and rst is None and body == b"conn=0 /v2/y", "h2 client: %r" %
            ((st, rst, body),))
    completed["api.example.test"] += 1
    check_block("h2 client", "api.example.test", "/v2/y",
                [("authorization", "Bearer " + SECRET), ("x-custom", "two"),
                 ("accept-encoding", "identity")])

    out = h1("query.example.test", b"GET /q?alt=json&key=placeholder&x=1 HTTP/1.1\r\n"
             b"Host: query.example.test\r\n\r\n")
    t.check(t.parse_response(out)[0].status == 200, "query, h1 client: %r" % out[:200])
    completed["query.example.test"] += 1
    check_block("query, h1 client", "query.example.test", "/q?alt=json&key=" + QENC + "&x=1",
                [("accept-encoding", "identity")])
    cq = h2raw.Conn(vg.port, vg.ca, sni="query.example.test")
    sid = h2req(cq, "/q2?key=placeholder", host="query.example.test")
    t.check(cq.outcome(sid)[0] == 200, "query, h2 client: %r" % (cq.outcome(sid),))
    cq.close()
    completed["query.example.test"] += 1
    check_block("query, h2 client", "query.example.test", "/q2?key=" + QENC,
                [("accept-encoding", "identity")])
    t.check(up.accepts == 2, "one connection per host expected: %d" % up.accepts)

    # ---- a request body, from both ---------------------------------------------------------
    payload = bytes(range(256)) * 1000
    out = h1("api.example.test", b"POST /body HTTP/1.1\r\nHost: api.example.test\r\n"
             b"Content-Length: %d\r\n\r\n" % len(payload), payload)
    r, _ = t.parse_response(out)
    t.check(r.status == 200 and last_request("/body").body == payload and
            last_request("/body").header("content-length") == [str(len(payload))],
            "h1 body: %r" % r)
    completed["api.example.test"] += 1
    with open(os.path.join(d, "payload"), "wb") as f:
        f.write(payload)
    p = subprocess.run(["curl", "-sS", "--http2", "--resolve", "api.example.test:%d:127.0.0.1" %
                        vg.port, "--cacert", vg.ca, "--data-binary", "@" + f.name,
                        "https://api.example.test:%d/body2" % vg.port], capture_output=True,
                       timeout=30)
    t.check(p.returncode == 0 and p.stdout == payload and
            last_request("/body2").body == payload, "h2 body: rc %d, %d bytes back, %r" %
            (p.returncode, len(p.stdout), p.stderr[-200:]))
    completed["api.example.test"] += 1

    # a body whose last bytes fill the stream's buffer while the upstream's window is shut:
    # it completes once the window opens (64 KiB is what vaultgate holds for one stream). A
    # first request without a body lets vaultgate read the server's SETTINGS (window 0) first.
    out = vg.exchange("shut.example.test", b"GET /warm HTTP/1.1\r\nHost: shut.example.test\r\n"
                      b"Connection: close\r\n\r\n", timeout=5)
    t.check(out and t.parse_response(out)[0].body == b"got 0", "shut warm-up %r" % out[-100:])
    for n in (64 * 1024, 80 * 1024):
        out = vg.exchange("shut.example.test", b"POST /shut HTTP/1.1\r\nHost: shut.example.test"
                          b"\r\nConnection: close\r\nContent-Length: %d\r\n\r\n" % n +
                          b"z" * n, timeout=5)
        t.check(out and t.parse_response(out)[0].body == b"got %d" % n,
                "%d bytes behind a shut window: %r" % (n, out[-100:]))
    t.check(len(shut.requests) == 3 and not shut.errors, "shut: %r" % shut.errors)

    # ---- trailers --------------------------------------------------------------------------
    sid = h2req(c, "/trailers")
    st, rst, body = c.outcome(sid)
    tr = trailers_of(c, sid)
    t.check(st == 200 and rst is None and body == b"hello world", "h2 trailers body %r" %
            ((st, rst, body),))
    t.check(tr == [("x-checksum", "abc"), ("x-auth-echo", "Bearer " + STARS)],
            "h2 client trailers %r" % tr)
    completed["api.example.test"] += 1
    out = h1("api.example.test", b"GET /trailers HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    head, _, rest = out.partition(b"\r\n\r\n")
    t.check(b"Transfer-Encoding: chunked" in head, "h1 trailers: not chunked %r" % head)
    want = (b"0\r\nx-checksum: abc\r\nx-auth-echo: Bearer " + STARS.encode() + b"\r\n\r\n")
    t.check(rest.endswith(want) and b"hello " in rest and b"world" in rest,
            "h1 client chunked trailers %r, wanted to end %r" % (rest, want))
    completed["api.example.test"] += 1

    # ---- an echo of the secret: header, DATA cut across frames, trailer ------------------------
    sid = h2req(c, "/echo")
    st, rst, body = c.outcome(sid)
    hd = dict(headers_of(c, sid) or [])
    tr = dict(trailers_of(c, sid) or [])
    t.check(st == 200 and body == b"head Bearer " + STARS.encode() + b" tail",
            "h2 echo body %r" % body)
    t.check(hd.get("x-echo") == "Bearer " + STARS and tr.get("x-trailer-echo") ==
            "Bearer " + STARS and tr.get("x-sum") == "abc123", "h2 echo %r %r" % (hd, tr))
    completed["api.example.test"] += 1
    out = h1("api.example.test", b"GET /echo HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    t.check(SECRET.encode() not in out, "h1 echo carries the secret: %r" % out)
    r, _ = t.parse_response(out)
    t.check(r.header("x-echo") == "Bearer " + STARS and
            r.body == b"head Bearer " + STARS.encode() + b" tail" and
            out.endswith(b"x-trailer-echo: Bearer " + STARS.encode() + b"\r\nx-sum: abc123"
                         b"\r\n\r\n"), "h1 echo %r" % out)
    completed["api.example.test"] += 1

    # ---- RST_STREAM in the middle of a response ---------------------------------------------
    accepts = up.accepts
    sid = h2req(c, "/reset")
    st, rst, body = c.outcome(sid)
    t.check(st == 200 and body == b"partial" and rst is not None,
            "h2 client, upstream reset mid-body: status %r reset %r body %r" % (st, rst, body))
    t.check(not any(isinstance(ev, h2.events.StreamEnded) and ev.stream_id == sid
                    for ev in c.events), "a reset answer ended cleanly")
    sid = h2req(c, "/after-reset")
    t.check(c.outcome(sid)[:3:2] == (200, b"conn=0 /after-reset"),
            "the h2 client's connection after the reset")
    completed["api.example.test"] += 1
    out = h1("api.example.test", b"GET /reset HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    head, _, rest = out.partition(b"\r\n\r\n")
    t.check(head.startswith(b"HTTP/1.1 200") and b"chunked" in head and b"partial" in rest and
            not rest.endswith(b"0\r\n\r\n"), "h1 client, upstream reset mid-body: %r" % out)
    try:
        t.parse_response(out)
        t.fail("a cut chunked body parsed as complete: %r" % out)
    except EOFError:
        pass
    t.check(up.accepts == accepts, "a stream reset cost the upstream connection: %r" % up.errors)

    # ---- GOAWAY: the next request takes a new connection ------------------------------------
    def get(kind, path):
        """GET path on the api host from the h2 client c or a new HTTP/1.1 client."""
        if kind == "h2":
            st, _, body = c.outcome(h2req(c, path))
            return st, body
        r, _ = t.parse_response(h1("api.example.test", b"GET %s HTTP/1.1\r\n"
                                   b"Host: api.example.test\r\n\r\n" % path.encode()))
        return r.status, r.body

    for first, then in (("h2", "h1"), ("h1", "h2")):
        accepts = up.accepts
        cur = up.requests[-1].conn  # the api host's connection
        st, body = get(first, "/goaway")
        t.check(st == 200 and body == b"conn=%d" % cur, "%s /goaway: %r %r" % (first, st, body))
        st, body = get(then, "/after-goaway")
        t.check(st == 200 and body == b"conn=%d /after-goaway" % accepts,
                "%s after GOAWAY: %r %r (connections %d)" % (then, st, body, up.accepts))
        completed["api.example.test"] += 2
        t.check(up.accepts == accepts + 1, "after GOAWAY: %d connections" % up.accepts)
    # a stream above the GOAWAY's last stream id was refused unprocessed: sent again
    accepts = up.accepts
    cur = up.requests[-1].conn
    sa = h2req(c, "/hold-a")
    t.check(t.wait_for(lambda: any(r.header(":path") == ["/hold-a"] for r in up.requests)),
            "A never arrived")
    sb = h2req(c, "/hold-b")
    st_a, _, body_a = c.outcome(sa, timeout=10)
    st_b, rst_b, body_b = c.outcome(sb, timeout=10)
    t.check(st_a == 200 and body_a == b"A conn=%d" % cur, "A: %r %r" % (st_a, body_a))
    t.check(st_b == 200 and body_b == b"conn=%d /hold-b" % accepts,
            "B, refused by the GOAWAY: %r %r %r" % (st_b, rst_b, body_b))
    completed["api.example.test"] += 2
    c.close()

    # ---- the client goes away mid-answer: the upstream stream is cancelled, the connection kept
    c = h2raw.Conn(vg.port, vg.ca)
    accepts = up.accepts
    sid = h2req(c, "/slow-h2")
    c.pump(lambda c: any(getattr(ev, "stream_id", None) == sid and
                         isinstance(ev, h2.events.DataReceived) for ev in c.events))
    c.h2.reset_stream(sid, error_code=8)
    c.flush()
    s = vg.tls_client("api.example.test")
    s.sendall(b"GET /slow-h1 HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    t.check(b"first" in s.recv(4096) or b"first" in s.recv(4096), "slow h1 answer")
    s.close()
    for path in ("/slow-h2", "/slow-h1"):
        r = last_request(path)
        t.check(t.wait_for(lambda: r.reset_by_client is not None),
                "%s: the upstream stream outlived its client" % path)
        t.check(r.reset_by_client == 8, "%s: reset with %r, not CANCEL" % (path, r.reset_by_client))
    sid = h2req(c, "/after-cancel")
    t.check(c.outcome(sid)[0] == 200 and up.accepts == accepts, "after the client went away")
    completed["api.example.test"] += 1
    # a whole answer before the request body ended (RFC 9113 §8.1), the client's body stopping
    # there: the upstream stream is cancelled, not left open half-sent
    s = vg.tls_client("api.example.test")
    s.sendall(b"POST /early-h1 HTTP/1.1\r\nHost: api.example.test\r\nContent-Length: 100000"
              b"\r\n\r\n" + b"a" * 1000)
    r, _ = t.parse_response(s.recv(65536), reader=lambda: s.recv(65536))
    t.check(r.status == 200 and r.body == b"early", "early answer, h1 client: %r" % r)
    sid = c.request([(":method", "POST"), (":scheme", "https"),
                     (":authority", "api.example.test"), (":path", "/early-h2")], body=b"a" * 1000,
                    end=False)
    st, _, body = c.outcome(sid)
    t.check(st == 200 and body == b"early", "early answer, h2 client: %r %r" % (st, body))
    try:
        c.h2.reset_stream(sid, error_code=8)  # unless vaultgate reset it first
        c.flush()
    except h2.exceptions.StreamClosedError:
        pass
    s.close()
    for path in ("/early-h1", "/early-h2"):
        r = last_request(path)
        t.check(t.wait_for(lambda: r.reset_by_client is not None),
                "%s: the upstream stream was left open half-sent" % path)
    completed["api.example.test"] += 2
    c.close()

    # ---- an upstream nobody listens on -------------------------------------------------------
    out = h1("down.example.test", b"GET /x HTTP/1.1\r\nHost: down.example.test\r\n\r\n")
    r, _ = t.parse_response(out)
    t.check(r.status == 502 and "error=connection_refused" in (r.header("Proxy-Status") or ""),
            "h1 client, unreachable upstream: %r" % r)
    c = h2raw.Conn(vg.port, vg.ca, sni="down.example.test")
    sids = [h2req(c, "/d%d" % i, host="down.example.test") for i in range(5)]
    t0 = time.monotonic()
    for sid in sids:
        st, rst, body = c.outcome(sid, timeout=15)
        ps = dict(headers_of(c, sid) or []).get("proxy-status", "")
        t.check(st == 502 and "error=connection_refused" in ps,
                "h2 client, unreachable upstream, stream %d: %r %r %r" % (sid, st, rst, ps))
    # before the 10 s connect timeout could have ended them
    t.check(time.monotonic() - t0 < 8, "queued requests waited %.1f s" % (time.monotonic() - t0))
    c.close()
    t.check(not up.errors, "upstream errors %r" % up.errors)
finally:
    vg.stop()
    up.stop()
    shut.stop()

log = vg.stderr()
for s in (SECRET, QSECRET, QENC):
    t.check(s not in log, "a secret in vaultgate's log")
reqs = vg.events("request")
for host, n in completed.items():
    ok = [e for e in reqs if e.get("host") == host and e.get("status") == 200 and
          e.get("route") == "direct" and e.get("decision") == "inject"]
    t.check(len(ok) == n, "%s: %d complete request lines, wanted %d" % (host, len(ok), n))
t.check({e.get("proto") for e in reqs} == {"h2", "http/1.1"}, "protos %r" %
        {e.get("proto") for e in reqs})
t.check(len([e for e in reqs if e.get("host") == "down.example.test" and
             e.get("status") == 502]) == 6, "down.example.test request lines")
routes = {(r["host"], r["route"]): r["count"] for r in t.audit_rows(vg, "routes")}
t.check(routes == {("api.example.test", "direct"): completed["api.example.test"],
                   ("query.example.test", "direct"): completed["query.example.test"],
                   ("shut.example.test", "direct"): 3},
        "egress_route_log %r, wanted %r" % (routes, completed))
t.check(t.audit_rows(vg, "blocked") == [], "blocked_host_log rows")
