#!/usr/bin/env python3
"""Rule scopes (SPEC §3 "Scope", "Decision for one request"), on every listener: the TLS
listener, the plain-HTTP listener, the explicit proxy (absolute-form, and CONNECT then TLS), and
one HTTP/2 client (curl --http2).

- A read-only token for one organisation (GET/HEAD under /repos/acme, /orgs/acme/) and a write
  token for issues only (POST under /repos/acme/issues): every prefix and method case gets the
  right secret or 403 `outside the scope of the rules for this host`, and a refused request never
  reaches the upstream, not even with the sandbox's own Authorization.
- First match between a scoped and an unscoped rule, in both orders.
- Each non-canonical path form is 400 on a host with path scopes, passes on a host with only a
  method scope and on a host without rules.
- Refusals are recorded (blocked_host_log, route refused); 400s are not; no secret in the log.

Why this can fail: matching prefixes by bytes alone (/repos/acme-evil), forgetting step 3 (the
request would go out with the sandbox's own credentials), skipping the canonical check on one
listener, or checking paths on hosts without path scopes."""
import socket
import ssl
import subprocess
import vgtest as t

RO, RW, A, B = ("ghp_canaryREADONLY000000000000000000001", "ghp_canaryREADWRITE00000000000000000002",
                "sk-canary-SCOPED-A-0003", "sk-canary-OPEN-B-0004")
HOST, MIXED, OPEN_FIRST, METHODS, NORULE = ("api.scoped.test", "mixed.scoped.test",
                                            "open.scoped.test", "methods.scoped.test",
                                            "norule.scoped.test")
vault = t.example_vault(
    secrets={"RO": {"value": RO}, "RW": {"value": RW}, "A": {"value": A}, "B": {"value": B}},
    rules=[
        {"host_pattern": HOST, "secret": "RO", "scheme": "bearer", "methods": ["GET", "HEAD"],
         "paths": ["/repos/acme", "/orgs/acme/"]},
        {"host_pattern": HOST, "secret": "RW", "scheme": "bearer", "methods": ["POST"],
         "paths": ["/repos/acme/issues"]},
        {"host_pattern": MIXED, "secret": "A", "scheme": "bearer", "paths": ["/v1/models:x"]},
        {"host_pattern": MIXED, "secret": "B", "scheme": "bearer"},
        {"host_pattern": OPEN_FIRST, "secret": "B", "scheme": "bearer"},
        {"host_pattern": OPEN_FIRST, "secret": "A", "scheme": "bearer", "methods": ["GET"]},
        {"host_pattern": METHODS, "secret": "A", "scheme": "bearer", "methods": ["GET"]},
    ],
    hosts={NORULE: "allow"})

names = [HOST, MIXED, OPEN_FIRST, METHODS, NORULE]
d, certs, up, vg = t.setup(names=names, vault=vault, handler=t.echo_handler, http=True,
                           proxy=True, audit="sqlite")


def head(method, target, host, absolute=False):
    tgt = ("http://%s%s" % (host, target)) if absolute else target
    body = b"x=1" if method in ("POST", "PUT") else b""
    return (b"%s %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer sandbox-own-token\r\n"
            b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (
                method.encode(), tgt.encode(), host.encode(), len(body))) + body


def via_tls(method, target, host):
    return vg.request(host, head(method, target, host), method)


def via_plain(method, target, host):
    out = vg.http_exchange(head(method, target, host))
    return t.parse_response(out, method)[0]


def via_proxy_absolute(method, target, host):
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    try:
        s.sendall(head(method, target, host, absolute=True))
        return t.parse_response(t.read_until_close(s), method)[0]
    finally:
        s.close()


def via_proxy_connect(method, target, host):
    raw = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    raw.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(),
                                                                        host.encode()))
    buf = b""
    while b"\r\n\r\n" not in buf:
        c = raw.recv(4096)
        t.check(c, "CONNECT: no answer")
        buf += c
    t.check(buf.startswith(b"HTTP/1.1 200"), "CONNECT %s: %r" % (host, buf[:80]))
    ctx = vg.client_ctx()
    s = ctx.wrap_socket(raw, server_hostname=host)
    try:
        s.sendall(head(method, target, host))
        return t.parse_response(t.read_until_close(s), method)[0]
    finally:
        s.close()


LISTENERS = {"tls": via_tls, "plain": via_plain, "proxy-absolute": via_proxy_absolute,
             "proxy-connect": via_proxy_connect}


def expect(send, lname, method, target, host, status, secret=None):
    n = len(up.requests)
    r = send(method, target, host)
    where = "%s: %s %s%s" % (lname, method, host, target)
    t.check(r.status == status, "%s: %d %r" % (where, r.status, r.body[:200]))
    if status == 200:
        t.check(len(up.requests) == n + 1, "%s: not forwarded" % where)
        got = up.requests[-1].header("Authorization")
        t.check(got == ["Bearer " + secret], "%s: upstream got the wrong credential" % where)
    else:
        t.check(len(up.requests) == n, "%s: a refused request reached the upstream" % where)
        ps = r.header("Proxy-Status") or ""
        if status == 403:
            t.check("outside the scope of the rules for this host" in ps, "%s: %r" % (where, ps))
        if status == 400:
            t.check("error=http_request_error" in ps, "%s: %r" % (where, ps))
    for s in (RO, RW, A, B):
        t.check(s.encode() not in r.body and s not in str(r.fields), "%s: secret echoed" % where)


NONCANONICAL = ["/repos/acme/../other", "/repos/./acme", "/repos/acme/.", "/repos/acme/..",
                "/repos/acme/%2e%2e/other", "/repos/acme/%2E%2E/other", "/repos/acme/%2e",
                "/repos/acme%2fx", "/repos/acme%2Fx", "/repos/acme%5cx", "/repos/acme%5Cx",
                "/repos/acme\\x", "/repos/acme/..;/other", "/repos/acme/%zz"]

try:
    for lname, send in LISTENERS.items():
        # the read-only rule: every prefix and method case
        expect(send, lname, "GET", "/repos/acme", HOST, 200, RO)
        expect(send, lname, "GET", "/repos/acme/widgets/contents?ref=main", HOST, 200, RO)
        expect(send, lname, "HEAD", "/repos/acme/", HOST, 200, RO)
        expect(send, lname, "GET", "/repos/%61cme/x", HOST, 200, RO)  # %61 is 'a' to a server
        expect(send, lname, "GET", "/orgs/acme/members", HOST, 200, RO)
        expect(send, lname, "GET", "/orgs/acme", HOST, 403)  # the prefix ends with '/'
        expect(send, lname, "GET", "/repos/acme-evil", HOST, 403)
        expect(send, lname, "GET", "/repos/acmex/y", HOST, 403)
        expect(send, lname, "GET", "/repos/other", HOST, 403)
        expect(send, lname, "GET", "/Repos/acme", HOST, 403)
        expect(send, lname, "DELETE", "/repos/acme", HOST, 403)
        expect(send, lname, "PUT", "/repos/acme/x", HOST, 403)
        # the write rule: POST under issues only
        expect(send, lname, "POST", "/repos/acme/issues", HOST, 200, RW)
        expect(send, lname, "POST", "/repos/acme/issues/7/comments", HOST, 200, RW)
        expect(send, lname, "POST", "/repos/acme/pulls", HOST, 403)
        expect(send, lname, "POST", "/repos/acme/issues-x", HOST, 403)
        # first match: scoped before unscoped, then unscoped before scoped
        expect(send, lname, "GET", "/v1/models:x", MIXED, 200, A)
        expect(send, lname, "POST", "/v1/models%3Ax/run", MIXED, 200, A)
        expect(send, lname, "GET", "/v2/other", MIXED, 200, B)
        expect(send, lname, "GET", "/anything", OPEN_FIRST, 200, B)
        # the canonical path: 400 on hosts with path scopes, whichever rule would win
        for p in NONCANONICAL:
            expect(send, lname, "GET", p, HOST, 400)
        expect(send, lname, "GET", "/v2/../v1/models:x", MIXED, 400)
        # a method scope alone needs no canonical path; nor does a host without rules
        expect(send, lname, "GET", "/a/../b", METHODS, 200, A)
        expect(send, lname, "POST", "/a", METHODS, 403)
    # a host without rules is not checked (over TLS: elsewhere it would be plain HTTP on 80)
    r = via_tls("GET", "/a/%2e%2e/b", NORULE)
    t.check(r.status == 200 and up.requests[-1].header("Authorization") ==
            ["Bearer sandbox-own-token"], "host without rules: %r" % r)

    # HTTP/2: the same decision per stream
    for path, status in (("/repos/acme/x", 200), ("/repos/acme-evil", 403),
                         ("/repos/acme/%2e%2e/x", 400)):
        n = len(up.requests)
        p = vg.curl(HOST, path, ["--http2", "-o", "/dev/null", "-w", "%{http_code} %{http_version}",
                                 "-H", "Authorization: Bearer sandbox-own-token"])
        out = p.stdout.decode()
        t.check(out == "%d 2" % status, "h2 %s: %r %r" % (path, out, p.stderr[-300:]))
        t.check(len(up.requests) == n + (1 if status == 200 else 0), "h2 %s: forwarded" % path)
        if status == 200:
            t.check(up.requests[-1].header("Authorization") == ["Bearer " + RO], "h2: wrong secret")
finally:
    vg.stop()
    up.stop()

blocked = [row for row in t.audit_rows(vg, "blocked") if row["host"] == HOST]
t.check(blocked and blocked[0]["seen_count"] >= 4 * 9 + 1,
        "out-of-scope refusals not recorded: %r" % blocked)
routes = {(row["host"], row["route"]) for row in t.audit_rows(vg, "routes")}
t.check((HOST, "refused") in routes and (HOST, "direct") in routes, "routes: %r" % routes)
err = vg.stderr()
for s in (RO, RW, A, B, "sandbox-own-token", "/repos/acme"):
    t.check(s not in err, "the log carries %r" % s)
reqs = vg.events("request")
t.check(any(e.get("reason") == "out_of_scope" and e.get("decision") == "block" for e in reqs),
        "no out_of_scope request line")
t.check(any(e.get("reason") == "noncanonical_path" and e.get("decision") == "error"
            for e in reqs), "no noncanonical_path request line with decision error")
t.log("ok")
