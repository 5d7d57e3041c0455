#!/usr/bin/env python3
"""Report-only policy (SPEC §12): a vault with `host_policy.enforce: false` and a block default
(catch-all) forwards what policy would refuse, without any credential, over every transport: the
TLS listener (HTTP/1.1 and curl --http2), the plain-HTTP listener, the explicit proxy (curl's
CONNECT, and absolute-form). The upstream asserts the exact head it got: a block entry, a host
under the block default and a rule host outside its rule's scope all arrive without a secret; the
rule host inside its scope still gets it; a rule host reached out of scope from the plain
listener or by absolute-form still goes over TLS to 443. A metadata address is still 403 and in
blocked_host_log; a forbidden absolute-form port too. egress_route_log counts the forwarded ones
under `reported`, blocked_host_log holds none of them; /v1/status is degraded with
`report-only: N requests would have been refused` (N exact), the status page shows the warning,
requests_total counts them as `allow` and reported_total counts them; `vaultgate check` notes
`report-only: refusals are recorded, not enforced` (text and --json). A reload with
`enforce: true` ends the warning and blocks again.

Why this can fail: on a build without report-only the vault is invalid (unknown field), and with
the field ignored every blocked request would be 403."""
import json
import os
import signal
import subprocess
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test", "scoped.example.test", "blocked.example.test",
                         "other.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)
up80 = t.FakeUpstream(None, None, t.echo_handler, port=80, tls=False)
RULES = [{"host_pattern": "api.example.test", "secret": "API_KEY", "scheme": "bearer"},
         {"host_pattern": "scoped.example.test", "secret": "API_KEY", "scheme": "header",
          "name": "X-Api-Key", "methods": ["GET"], "paths": ["/ok"]}]


def vault(enforce):
    v = t.example_vault(rules=RULES, default="block",
                        hosts={"blocked.example.test": "block", "free.example.test": "allow"})
    v["host_policy"]["enforce"] = enforce
    return v


vg = t.Vaultgate(d, vault(False), upstream_ca=certs["ca"], http=True, proxy=True,
                 audit="sqlite",
                 pins=[up.pin(h) for h in ("api.example.test", "scoped.example.test",
                                           "blocked.example.test", "other.example.test")] +
                 [up80.pin(h).replace(":443:", ":80:") for h in ("blocked.example.test",
                                                                "other.example.test")])


def last_head(u, n_before):
    t.check(len(u.requests) == n_before + 1, "upstream got %d requests, want %d" %
            (len(u.requests), n_before + 1))
    return u.requests[-1].raw_head


def tls_req(host, raw):
    n = len(up.requests)
    r = vg.request(host, raw)
    return r, n


def expect(u, n, want, what):
    got = last_head(u, n)
    t.check(got == want, "%s: upstream head\n%r\nwant\n%r" % (what, got, want))


reported = 0
texts = {}
try:
    # vaultgate check notes it, text and --json
    p = subprocess.run([t.VG_BIN, "check", "--vault", vg.vault_path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    t.check(p.returncode == 0, "check: %d %s" % (p.returncode, p.stderr))
    t.check("note: report-only: refusals are recorded, not enforced" in p.stdout.splitlines(),
            "check text: %r" % p.stdout)
    t.check("mode: catch-all" in p.stdout, "routing mode still derived: %r" % p.stdout)
    p = subprocess.run([t.VG_BIN, "check", "--json", "--vault", vg.vault_path],
                       stdout=subprocess.PIPE, text=True, timeout=30)
    j = json.loads(p.stdout)
    t.check("report-only: refusals are recorded, not enforced" in j["notes"], "json %r" % j)
    vg.start()

    # TLS listener, HTTP/1.1: a block entry, the block default, a rule host out of scope
    for host, method, path in ((b"blocked.example.test", b"GET", b"/b?q=1"),
                               (b"other.example.test", b"GET", b"/o"),
                               (b"scoped.example.test", b"POST", b"/ok"),
                               (b"scoped.example.test", b"GET", b"/other")):
        body = b"" if method == b"GET" else b"Content-Length: 2\r\n"
        r, n = tls_req(host.decode(), method + b" " + path + b" HTTP/1.1\r\nHost: " + host +
                       b"\r\nX-Api-Key: placeholder\r\n" + body + b"Connection: close\r\n\r\n" +
                       (b"hi" if body else b""))
        t.check(r.status == 200, "%s %s over TLS: %r" % (method, host, r))
        expect(up, n, method + b" " + path + b" HTTP/1.1\r\nHost: " + host +
               b"\r\nX-Api-Key: placeholder\r\n" + body + b"\r\n", b"TLS " + host)
        reported += 1
    # the rule inside its scope still injects
    r, n = tls_req("scoped.example.test", b"GET /ok/x HTTP/1.1\r\nHost: scoped.example.test\r\n"
                   b"X-Api-Key: placeholder\r\nConnection: close\r\n\r\n")
    t.check(r.status == 200, "in scope: %r" % r)
    expect(up, n, b"GET /ok/x HTTP/1.1\r\nHost: scoped.example.test\r\nX-Api-Key: " +
           SECRET.encode() + b"\r\nAccept-Encoding: identity\r\n\r\n", "in scope")
    r, n = tls_req("api.example.test", b"GET /v1 HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Authorization: Bearer placeholder\r\nConnection: close\r\n\r\n")
    t.check(r.status == 200 and up.requests[-1].header("Authorization") ==
            ["Bearer " + SECRET], "rule host: %r" % up.requests[-1].raw_head)

    # HTTP/2 from curl: a block entry and a rule host out of scope, without the secret
    for host, path in (("blocked.example.test", "/h2"), ("scoped.example.test", "/h2")):
        n = len(up.requests)
        p = vg.curl(host, path, ["--http2", "-A", "vg-test", "-H", "X-Api-Key: placeholder",
                                 "-o", "/dev/null", "-w", "%{http_code} %{http_version}"])
        t.check(p.stdout == b"200 2", "curl --http2 %s: %r %r" % (host, p.stdout, p.stderr))
        expect(up, n, b"GET " + path.encode() + b" HTTP/1.1\r\nHost: " + host.encode() +
               b"\r\nuser-agent: vg-test\r\naccept: */*\r\nx-api-key: placeholder\r\n\r\n",
               "h2 " + host)
        reported += 1

    # plain-HTTP listener: a blocked host goes to port 80; a rule host out of scope over TLS
    n80 = len(up80.requests)
    r, _ = t.parse_response(vg.http_exchange(
        b"GET /p HTTP/1.1\r\nHost: blocked.example.test\r\nConnection: close\r\n\r\n"))
    t.check(r.status == 200, "plain blocked: %r" % r)
    expect(up80, n80, b"GET /p HTTP/1.1\r\nHost: blocked.example.test\r\n\r\n", "plain")
    reported += 1
    n = len(up.requests)
    r, _ = t.parse_response(vg.http_exchange(
        b"DELETE /ok HTTP/1.1\r\nHost: scoped.example.test\r\nConnection: close\r\n\r\n"))
    t.check(r.status == 200, "plain out of scope: %r" % r)
    expect(up, n, b"DELETE /ok HTTP/1.1\r\nHost: scoped.example.test\r\n\r\n",
           "plain out of scope (TLS to 443)")
    reported += 1

    # explicit proxy: curl's CONNECT to a blocked host is intercepted and forwarded
    n = len(up.requests)
    p = subprocess.run(["curl", "-sS", "--max-time", "20", "--http1.1", "-x",
                        "http://127.0.0.1:%d" % vg.proxy_port, "--cacert", vg.ca, "-A",
                        "vg-test", "-o", "/dev/null", "-w", "%{http_code}",
                        "https://blocked.example.test/c"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    t.check(p.stdout == b"200", "curl -x CONNECT: %r %r" % (p.stdout, p.stderr))
    expect(up, n, b"GET /c HTTP/1.1\r\nHost: blocked.example.test\r\nUser-Agent: vg-test\r\n"
           b"Accept: */*\r\n\r\n", "CONNECT")
    reported += 1
    # absolute-form: a blocked host on 80, a rule host out of scope (TLS to 443 even for :8080)
    for target, u, want in (
            (b"http://other.example.test/a", up80,
             b"GET /a HTTP/1.1\r\nHost: other.example.test\r\n\r\n"),
            (b"http://scoped.example.test:8080/x", up,
             b"GET /x HTTP/1.1\r\nHost: scoped.example.test\r\n\r\n")):
        n = len(u.requests)
        out = subprocess.run(
            ["curl", "-sS", "--max-time", "20", "-x", "http://127.0.0.1:%d" % vg.proxy_port,
             "-H", "User-Agent:", "-H", "Accept:", "-o", "/dev/null", "-w", "%{http_code}",
             target.decode()], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        t.check(out.stdout == b"200", "absolute-form %s: %r %r" % (target, out.stdout,
                                                                  out.stderr))
        expect(u, n, want, b"absolute-form " + target)
        reported += 1

    # not policy: a metadata address and a forbidden port are still refused and recorded
    accepts = (up.accepts, up80.accepts)
    r, _ = t.parse_response(vg.http_exchange(
        b"GET / HTTP/1.1\r\nHost: 169.254.169.254\r\nConnection: close\r\n\r\n"))
    t.check(r.status == 403 and "destination address prohibited" in
            (r.header("Proxy-Status") or ""), "metadata address: %r" % r)
    reported += 1  # the block default decided it first: counted, then refused by address
    out = subprocess.run(
        ["curl", "-sS", "--max-time", "20", "-x", "http://127.0.0.1:%d" % vg.proxy_port,
         "-o", "/dev/null", "-w", "%{http_code}", "http://other.example.test:8080/"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    t.check(out.stdout == b"403", "absolute-form port 8080: %r" % out.stdout)
    reported += 1
    t.check((up.accepts, up80.accepts) == accepts, "a refused request reached an upstream")

    # status: degraded, with the count
    st = vg.status()
    want_w = "report-only: %d requests would have been refused" % reported
    t.check(st["enforcement"] == "degraded" and want_w in st["warnings"],
            "status %r, want %r" % (st, want_w))
    t.check("report-only: refusals are recorded, not enforced" in st["notes"], "notes %r" % st)
    code, page = vg.admin_get("/")
    page = page.decode()
    t.check(code == 200 and 'data-state="degraded"' in page and want_w in page,
            "status page lacks the warning")
    t.check("The vault is report-only" in page and "still decided by the vault" not in page,
            "the status page says requests are decided by the vault")
    m = t.metrics_text(vg)
    texts.update({"status": json.dumps(st), "status page": page, "metrics": m})
    t.check(t.metric_value(m, "vaultgate_reported_total") == reported, "reported_total:\n" + m)
    t.check(t.metric_value(m, 'vaultgate_requests_total{decision="allow",code_class="2xx"}')
            == reported - 2, "reported requests count as allow:\n" + m)

    # the audit: routes `reported`, blocked_host_log only for what was really refused
    def routes():
        code, body = vg.admin_get("/v1/egress-routes")
        return {(x["host"], x["route"]): x["count"] for x in json.loads(body)} if code == 200 \
            else {}
    want_routes = {("blocked.example.test", "reported"): 4, ("other.example.test", "reported"): 2,
                   ("scoped.example.test", "reported"): 5, ("169.254.169.254", "refused"): 1,
                   ("other.example.test", "refused"): 1,
                   ("scoped.example.test", "direct"): 1, ("api.example.test", "direct"): 1}
    got = t.wait_for(lambda: (lambda r: r if r == want_routes else None)(routes()),
                     timeout=10) or routes()
    t.check(got == want_routes, "egress routes %r\nwant %r" % (got, want_routes))
    code, body = vg.admin_get("/v1/blocked-hosts")
    hosts = sorted(x["host"] for x in json.loads(body))
    t.check(hosts == ["169.254.169.254", "other.example.test"], "blocked_host_log %r" % hosts)

    # enforce again: the warning ends, the host is blocked
    with open(vg.vault_path, "w") as f:
        json.dump(vault(True), f)
    os.chmod(vg.vault_path, 0o600)
    vg.proc.send_signal(signal.SIGHUP)
    t.check(t.wait_for(lambda: vg.status()["enforcement"] == "enforced", timeout=10),
            "still %r after the reload" % vg.status())
    t.check(not any(w.startswith("report-only") for w in vg.status()["warnings"]), "warning")
    r = vg.request("blocked.example.test", b"GET / HTTP/1.1\r\nHost: blocked.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 403, "blocked after the reload: %r" % r)
finally:
    rc = vg.stop()
    up.stop()
    up80.stop()
t.check(rc == 0, "exit %s" % rc)
rows = t.audit_rows(vg, "routes")
t.check({(x["host"], x["route"]) for x in rows} >= {("blocked.example.test", "refused")},
        "the enforced block is recorded: %r" % rows)
texts.update({"log": vg.stderr(), "audit rows": json.dumps(rows)})
t.check_absent(texts, [SECRET])
