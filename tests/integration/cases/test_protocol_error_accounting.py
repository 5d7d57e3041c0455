#!/usr/bin/env python3
"""Protocol errors - 400, 405, 421, 431, on the TLS, plain-HTTP and explicit-proxy listeners -
go to the event log and metrics only (SPEC §6, §7): no blocked_host_log row and no
egress_route_log row for any host they name, each one counted in
vaultgate_requests_total{decision="error",code_class="4xx"} and logged as a request event with
its status. For contrast, a blocked host (403) is counted under decision="block" and does get
both rows, and an injected request gets its `direct` route row: the tables are read back with
`vaultgate audit --json` after a clean stop (which flushes every count)."""
import socket
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
HOSTS = ["api.example.test", "blocked.example.test"] + [
    "%s%d.example.test" % (p, n) for p in "eh" for n in (400, 405, 421, 431)]
FIELDS = b"".join(b"X-%d: 1\r\n" % i for i in range(101))


def errors():
    """(listener, SNI or None, bytes, expected status); every host named is an e/h/p host."""
    out = []
    for n, st in ((b"e400", 400), (b"e405", 405), (b"e421", 421), (b"e431", 431)):
        host = n + b".example.test"
        req = {400: b"GET / HTTP/1.1\r\nHost: %s\r\nX: a\x01b\r\n\r\n",
               405: b"TRACE / HTTP/1.1\r\nHost: %s\r\n\r\n",
               421: b"GET / HTTP/1.1\r\nHost: other-%s\r\n\r\n",
               431: b"GET / HTTP/1.1\r\nHost: %s\r\n" + FIELDS.replace(b"%", b"%%") + b"\r\n"}[st]
        out.append(("https", host.decode(), req % host, st))
    for n, st in ((b"h400", 400), (b"h405", 405), (b"h421", 421), (b"h431", 431)):
        host = n + b".example.test"
        req = {400: b"GET / HTTP/1.1\r\nHost: %s\r\nBad_Name: 1\r\n\r\n",
               405: b"TRACE / HTTP/1.1\r\nHost: %s\r\n\r\n",
               421: b"GET / HTTP/1.1\r\nHost: %s:8081\r\n\r\n",
               431: b"GET / HTTP/1.1\r\nHost: %s\r\nX: " + b"a" * 70000 + b"\r\n\r\n"}[st]
        out.append(("http", None, req % host, st))
    for n, st in ((b"p400", 400), (b"p405", 405), (b"p421", 421), (b"p431", 431)):
        host = n + b".example.test"
        req = {400: b"GET /origin-form HTTP/1.1\r\nHost: %s\r\n\r\n",
               405: b"TRACE http://%s/ HTTP/1.1\r\nHost: p405.example.test\r\n\r\n",
               421: b"GET http://%s/ HTTP/1.1\r\nHost: other-p421.example.test\r\n\r\n",
               431: b"GET http://%s/ HTTP/1.1\r\nHost: p431.example.test\r\n" +
               FIELDS.replace(b"%", b"%%") + b"\r\n"}[st]
        out.append(("proxy", None, req % host, st))
    return out


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)
vault = t.example_vault(hosts=dict({h: "allow" for h in HOSTS[2:]},
                                   **{"blocked.example.test": "block"}))
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"], http=True, proxy=True, audit="sqlite",
                 pins=[up.pin("api.example.test")]).start()
ERRS = errors()
try:
    for listener, sni, data, want in ERRS:
        if listener == "https":
            out = vg.exchange(sni, data, timeout=5)
        else:
            port = vg.http_port if listener == "http" else vg.proxy_port
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(data)
            out = t.read_until_close(s)
            s.close()
        r, _ = t.parse_response(out)
        t.check(r.status == want, "%s %r: %d, wanted %d" % (listener, data[:50], r.status, want))
    t.check(up.accepts == 0, "a protocol error reached the upstream")
    r = vg.request("blocked.example.test", b"GET / HTTP/1.1\r\nHost: blocked.example.test\r\n\r\n")
    t.check(r.status == 403, "blocked: %r" % r)
    r = vg.request("api.example.test", b"GET / HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 200, "allowed: %r" % r)
    m = t.metrics_text(vg)
    n_err = t.metric_value(m, 'vaultgate_requests_total{decision="error",code_class="4xx"}')
    t.check(n_err == len(ERRS), "requests_total{decision=\"error\",code_class=\"4xx\"} = %r, "
            "wanted %d" % (n_err, len(ERRS)))
    t.check(t.metric_value(m, 'vaultgate_requests_total{decision="block",code_class="4xx"}') == 1,
            "block counted %r" % [l for l in m.splitlines() if "requests_total" in l])
    t.check(t.metric_value(m, "vaultgate_blocked_total") == 1, "blocked_total: protocol errors "
            "counted as blocks? %r" % [l for l in m.splitlines() if "blocked_total" in l])
finally:
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s" % rc)
blocked = sorted(x["host"] for x in t.audit_rows(vg, "blocked"))
t.check(blocked == ["blocked.example.test"], "blocked_host_log hosts %r" % blocked)
routes = sorted((x["host"], x["route"]) for x in t.audit_rows(vg, "routes"))
t.check(routes == [("api.example.test", "direct"), ("blocked.example.test", "refused")],
        "egress_route_log %r" % routes)
statuses = sorted(e.get("status") for e in vg.events("request")
                  if e.get("status") in (400, 405, 421, 431))
t.check(statuses == sorted(w for _, _, _, w in ERRS),
        "request events with an error status %r, wanted %r" %
        (statuses, sorted(w for _, _, _, w in ERRS)))
