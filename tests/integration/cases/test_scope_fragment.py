#!/usr/bin/env python3
"""A raw `#` in a request target, and `%00` in a path (SPEC §3 "Scope"), on every listener: TLS,
plain HTTP, the explicit proxy (absolute-form, and CONNECT then TLS), and HTTP/2 (`:path`, raw
frames).

- `GET /repos/acme#/../../orgs/x` on a rule scoped to `paths: ["/repos/acme"]` is 400
  (`fragment in the request target`), nothing forwarded; so is a `#` after the query, and a `#`
  on every other host: a rule host without a path scope, a host without rules, a blocked host.
  On HTTP/2 the 400 is the answer on that stream and the connection goes on serving.
- `%00` (an encoded NUL) is 400 on the host with a path scope, like `%2e %2f %5c`; it passes on a
  host whose rules have no path scope.
- The requests inside the scope still get the secret (the checks above are not a blanket 400).

Why this can fail: the scope check reads the path up to `#` while the whole target goes
upstream, so `/repos/acme#/../../orgs/x` was admitted with the secret and the upstream (or a
server behind it that resolves the dot segments) read `/orgs/x`; and an encoded NUL ends the path
early for C servers."""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import h2raw  # noqa: E402
import vgtest as t  # noqa: E402

SECRET, OPEN_SECRET = "ghp_canaryFRAGMENT0000000000000000000001", "sk-canary-FRAG-OPEN-0002"
SCOPED, OPEN, NORULE, BLOCKED = ("api.scoped.test", "open.scoped.test", "norule.scoped.test",
                                 "blocked.scoped.test")
vault = t.example_vault(
    secrets={"GH": {"value": SECRET}, "OPEN": {"value": OPEN_SECRET}},
    rules=[{"host_pattern": SCOPED, "secret": "GH", "scheme": "bearer", "paths": ["/repos/acme"]},
           {"host_pattern": OPEN, "secret": "OPEN", "scheme": "bearer", "methods": ["GET"]}],
    hosts={NORULE: "allow", BLOCKED: "block"})
d, certs, up, vg = t.setup(names=[SCOPED, OPEN, NORULE, BLOCKED], vault=vault,
                           handler=t.echo_handler, http=True, proxy=True)


def head(target, host, absolute=False):
    tgt = ("http://%s%s" % (host, target)) if absolute else target
    return (b"GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer sandbox-own-token\r\n"
            b"Connection: close\r\n\r\n" % (tgt.encode(), host.encode()))


def via_tls(target, host):
    return vg.exchange(host, head(target, host))


def via_plain(target, host):
    return vg.http_exchange(head(target, host))


def via_proxy_absolute(target, host):
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    try:
        s.sendall(head(target, host, absolute=True))
        return t.read_until_close(s)
    finally:
        s.close()


def via_proxy_connect(target, host):
    raw = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    raw.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(),
                                                                        host.encode()))
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = raw.recv(4096)
        t.check(c, "CONNECT: no answer")
        buf += c
    t.check(buf.startswith(b"HTTP/1.1 200"), "CONNECT %s: %r" % (host, buf[:80]))
    s = vg.client_ctx().wrap_socket(raw, server_hostname=host)
    try:
        s.sendall(head(target, host))
        return t.read_until_close(s)
    finally:
        s.close()


LISTENERS = {"tls": via_tls, "plain": via_plain, "proxy-absolute": via_proxy_absolute,
             "proxy-connect": via_proxy_connect}


def expect(lname, send, target, host, status, secret=None, details=None):
    n = len(up.requests)
    out = send(target, host)
    where = "%s: GET %s%s" % (lname, host, target)
    t.check(out, "%s: no answer" % where)
    r = t.parse_response(out)[0]
    t.check(r.status == status, "%s: %d %r" % (where, r.status, r.body[:200]))
    if status == 200:
        t.check(len(up.requests) == n + 1, "%s: not forwarded" % where)
        t.check(up.requests[-1].target == target, "%s: upstream got %r" % (where,
                                                                           up.requests[-1].target))
        t.check(up.requests[-1].header("Authorization") == ["Bearer " + secret],
                "%s: upstream got the wrong credential" % where)
        return
    t.check(len(up.requests) == n, "%s: a refused request reached the upstream" % where)
    ps = r.header("Proxy-Status") or ""
    t.check("error=http_request_error" in ps and details in ps, "%s: %r" % (where, ps))
    t.check((r.header("Connection") or "").lower() == "close", "%s: not closed" % where)


FRAGMENT = "fragment in the request target"
NUL = "encoded NUL in the path"
try:
    for lname, send in LISTENERS.items():
        expect(lname, send, "/repos/acme/x", SCOPED, 200, SECRET)  # inside the scope
        expect(lname, send, "/repos/acme#/../../orgs/x", SCOPED, 400, details=FRAGMENT)
        expect(lname, send, "/repos/acme/x?ref=main#/../../../orgs/x", SCOPED, 400,
               details=FRAGMENT)
        expect(lname, send, "/repos/acme/%00/../../orgs/x", SCOPED, 400, details=NUL)
        expect(lname, send, "/repos/acme/x%00.json", SCOPED, 400, details=NUL)
        # every host, not only scoped ones
        expect(lname, send, "/x#y", OPEN, 400, details=FRAGMENT)
        expect(lname, send, "/x%00y", OPEN, 200, OPEN_SECRET)  # no path scope: no path check
        if lname != "proxy-connect":  # (a CONNECT to a blocked host is 403 before any request)
            expect(lname, send, "/#", BLOCKED, 400, details=FRAGMENT)
        if lname == "tls":
            # (elsewhere a host without rules is plain HTTP on port 80, or a blind tunnel)
            expect(lname, send, "/a#b", NORULE, 400, details=FRAGMENT)

    # HTTP/2: a 400 answer on the stream; nothing forwarded; the connection goes on serving
    for host, path, status, secret in (
            (SCOPED, "/repos/acme/x", 200, SECRET),
            (SCOPED, "/repos/acme#/../../orgs/x", 400, None),
            (SCOPED, "/repos/acme?q=1#/../../orgs/x", 400, None),
            (SCOPED, "/repos/acme/%00/x", 400, None),
            (OPEN, "/x#y", 400, None),
            (NORULE, "/a#b", 400, None),
            (BLOCKED, "/#", 400, None)):
        c = h2raw.Conn(vg.port, vg.ca, sni=host)
        try:
            n = len(up.requests)
            sid = c.request([(":method", "GET"), (":scheme", "https"), (":authority", host),
                             (":path", path), ("authorization", "Bearer sandbox-own-token")])
            st, reset, body = c.outcome(sid)
            t.check((st, reset) == (status, None), "h2 %s%s: status %r reset %r" % (
                host, path, st, reset))
            if status == 200:
                t.check(len(up.requests) == n + 1 and up.requests[-1].target == path and
                        up.requests[-1].header("Authorization") == ["Bearer " + secret],
                        "h2 %s%s: not forwarded as sent" % (host, path))
                continue
            t.check(len(up.requests) == n, "h2 %s%s: reached the upstream" % (host, path))
            want = FRAGMENT if "#" in path else NUL
            t.check(want.encode() in body, "h2 %s%s: %r" % (host, path, body[:200]))
            # the stream's 400 leaves the connection serving (a path the host admits)
            ok = "/repos/acme/y" if host == SCOPED else "/fine"
            if host != BLOCKED:
                sid = c.request([(":method", "GET"), (":scheme", "https"), (":authority", host),
                                 (":path", ok)])
                st, reset, body = c.outcome(sid)
                t.check(st == 200, "h2 %s: the next stream got %r %r" % (host, st, reset))
        finally:
            c.close()
finally:
    vg.stop()
    up.stop()

t.check("#" not in "".join(r.target for r in up.requests), "a target with '#' went upstream")
t.check_absent({"log": vg.stderr()}, [SECRET, OPEN_SECRET, "sandbox-own-token", "orgs/x"])
t.log("ok")
