#!/usr/bin/env python3
"""Method override fields on hosts with a `methods` scope (SPEC §3 "Scope"), over HTTP/1.1 (TLS,
plain HTTP, the explicit proxy's absolute-form) and HTTP/2 (raw frames):

- a request carrying `X-HTTP-Method-Override`, `X-HTTP-Method` or `X-Method-Override` (any letter
  case of the name) to a host that has a rule with `methods` is 403 `outside the scope of the
  rules for this host`, never forwarded, and recorded like any refusal (blocked_host_log upsert,
  route refused, request line reason out_of_scope) - also when an unscoped rule of that host
  comes after the `methods` rule, and also when the value names the admitted method itself;
- hosts whose rules have no `methods` (a path scope only, no scope, no rule) forward the fields
  unchanged.

Why this can fail: the scope compares the request line's method while a server that honours the
override acts on another one: `GET /repos/acme` with `X-HTTP-Method-Override: DELETE` went out
with a read-only credential and deleted."""
import os
import socket
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import h2raw  # noqa: E402
import vgtest as t  # noqa: E402

RO, OPEN, PATHS = ("ghp_canaryOVERRIDE00000000000000000000001", "sk-canary-OVR-OPEN-0002",
                   "sk-canary-OVR-PATHS-0003")
METHODS, MIXED, PATHONLY, NOSCOPE, NORULE = ("api.methods.test", "mixed.methods.test",
                                             "paths.methods.test", "open.methods.test",
                                             "norule.methods.test")
vault = t.example_vault(
    secrets={"RO": {"value": RO}, "OPEN": {"value": OPEN}, "PATHS": {"value": PATHS}},
    rules=[{"host_pattern": METHODS, "secret": "RO", "scheme": "bearer",
            "methods": ["GET", "HEAD"], "paths": ["/repos/acme"]},
           {"host_pattern": MIXED, "secret": "RO", "scheme": "bearer", "methods": ["GET"]},
           {"host_pattern": MIXED, "secret": "OPEN", "scheme": "bearer"},
           {"host_pattern": PATHONLY, "secret": "PATHS", "scheme": "bearer", "paths": ["/v1"]},
           {"host_pattern": NOSCOPE, "secret": "OPEN", "scheme": "bearer"}],
    hosts={NORULE: "allow"})
d, certs, up, vg = t.setup(names=[METHODS, MIXED, PATHONLY, NOSCOPE, NORULE], vault=vault,
                           handler=t.echo_handler, http=True, proxy=True, audit="sqlite")

OVERRIDES = [("X-HTTP-Method-Override", "DELETE"), ("x-http-method-override", "PUT"),
             ("X-HTTP-Method", "DELETE"), ("X-HTTP-METHOD", "PATCH"),
             ("X-Method-Override", "DELETE"), ("x-METHOD-override", "GET")]


def head(target, host, field, absolute=False):
    tgt = ("http://%s%s" % (host, target)) if absolute else target
    extra = ("%s: %s\r\n" % field).encode() if field else b""
    return (b"GET %s HTTP/1.1\r\nHost: %s\r\n%sConnection: close\r\n\r\n" % (
        tgt.encode(), host.encode(), extra))


def via_tls(target, host, field):
    return vg.exchange(host, head(target, host, field))


def via_plain(target, host, field):
    return vg.http_exchange(head(target, host, field))


def via_proxy_absolute(target, host, field):
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    try:
        s.sendall(head(target, host, field, absolute=True))
        return t.read_until_close(s)
    finally:
        s.close()


LISTENERS = {"tls": via_tls, "plain": via_plain, "proxy-absolute": via_proxy_absolute}
refusals = 0


def expect(lname, send, target, host, field, status, secret=None):
    global refusals
    n = len(up.requests)
    out = send(target, host, field)
    where = "%s: GET %s%s with %r" % (lname, host, target, field)
    t.check(out, "%s: no answer" % where)
    r = t.parse_response(out)[0]
    t.check(r.status == status, "%s: %d %r" % (where, r.status, r.body[:200]))
    if status == 403:
        refusals += 1
        t.check(len(up.requests) == n, "%s: a refused request reached the upstream" % where)
        ps = r.header("Proxy-Status") or ""
        t.check('error=http_request_denied; details="outside the scope of the rules for this '
                'host"' in ps, "%s: %r" % (where, ps))
        return
    t.check(len(up.requests) == n + 1, "%s: not forwarded" % where)
    got = up.requests[-1]
    t.check(got.header("Authorization") == ["Bearer " + secret], "%s: wrong credential" % where)
    if field:
        t.check(got.header(field[0]) == [field[1]] and
                ("\r\n%s: %s\r\n" % field).encode() in got.raw_head,
                "%s: the field was not forwarded unchanged: %r" % (where, got.raw_head))


try:
    for lname, send in LISTENERS.items():
        expect(lname, send, "/repos/acme/x", METHODS, None, 200, RO)  # the scope still works
        for f in OVERRIDES:
            expect(lname, send, "/repos/acme/x", METHODS, f, 403)
        expect(lname, send, "/anything", MIXED, OVERRIDES[0], 403)  # unscoped rule after it
        expect(lname, send, "/anything", MIXED, None, 200, RO)
        for f in OVERRIDES[::2]:
            expect(lname, send, "/v1/x", PATHONLY, f, 200, PATHS)
            expect(lname, send, "/x", NOSCOPE, f, 200, OPEN)

    # HTTP/2: a 403 answer on the stream (names are lower case on the wire)
    for host, name, status in ((METHODS, "x-http-method-override", 403),
                               (METHODS, "x-http-method", 403),
                               (MIXED, "x-method-override", 403),
                               (PATHONLY, "x-http-method-override", 200),
                               (NOSCOPE, "x-method-override", 200)):
        c = h2raw.Conn(vg.port, vg.ca, sni=host)
        try:
            n = len(up.requests)
            path = "/v1/x" if host == PATHONLY else "/repos/acme/x"
            sid = c.request([(":method", "GET"), (":scheme", "https"), (":authority", host),
                             (":path", path), (name, "DELETE")])
            st, reset, body = c.outcome(sid)
            t.check((st, reset) == (status, None), "h2 %s %s: %r %r" % (host, name, st, reset))
            if status == 403:
                refusals += 1
                t.check(len(up.requests) == n, "h2 %s %s: forwarded" % (host, name))
                t.check(b"outside the scope of the rules for this host" in body,
                        "h2 %s: %r" % (host, body[:200]))
                # the stream's 403 leaves the connection serving
                sid = c.request([(":method", "GET"), (":scheme", "https"), (":authority", host),
                                 (":path", path)])
                st, reset, body = c.outcome(sid)
                t.check(st == 200, "h2 %s: the next stream got %r %r" % (host, st, reset))
            else:
                t.check(len(up.requests) == n + 1 and
                        up.requests[-1].header(name) == ["DELETE"],
                        "h2 %s: the field was not forwarded unchanged" % host)
        finally:
            c.close()
    # a host without rules (over TLS, where it is intercepted): forwarded unchanged
    r = t.parse_response(via_tls("/x", NORULE, OVERRIDES[0]))[0]
    t.check(r.status == 200 and up.requests[-1].header("X-HTTP-Method-Override") == ["DELETE"],
            "host without rules: %r" % r)
finally:
    vg.stop()
    up.stop()

blocked = {row["host"]: row for row in t.audit_rows(vg, "blocked")}
t.check(METHODS in blocked and blocked[METHODS]["seen_count"] >= 3 * 6 + 2,
        "method override refusals not recorded: %r" % blocked.get(METHODS))
t.check(MIXED in blocked, "the refusal on %s not recorded" % MIXED)
t.check(PATHONLY not in blocked and NOSCOPE not in blocked, "a forwarded host recorded as refused")
routes = {(row["host"], row["route"]) for row in t.audit_rows(vg, "routes")}
t.check((METHODS, "refused") in routes and (MIXED, "refused") in routes, "routes: %r" % routes)
reqs = vg.events("request")
n_oos = sum(1 for e in reqs if e.get("reason") == "out_of_scope" and e.get("decision") == "block")
t.check(n_oos == refusals, "%d out_of_scope request lines for %d refusals" % (n_oos, refusals))
t.check_absent({"log": vg.stderr()}, [RO, OPEN, PATHS, "DELETE", "PATCH"])
t.log("ok")
