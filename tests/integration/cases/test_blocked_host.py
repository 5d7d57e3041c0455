#!/usr/bin/env python3
"""A blocked host gets 403 with Proxy-Status and Connection: close; nothing reaches the
upstream; the refusal is in blocked_host_log and egress_route_log (route refused)."""
import json
import vgtest as t

d, certs, up, vg = t.setup(names=("api.example.test", "blocked.example.test"), audit="sqlite")
try:
    r = vg.request("blocked.example.test",
                   b"POST /upload?token=abc HTTP/1.1\r\nHost: blocked.example.test\r\n"
                   b"Content-Length: 4\r\n\r\nbody")
    t.check(r.status == 403, "status %d" % r.status)
    ps = r.header("Proxy-Status") or ""
    t.check(ps.startswith("vaultgate") and "error=http_request_denied" in ps and
            "host blocked by policy" in ps, "Proxy-Status: %r" % ps)
    t.check((r.header("Connection") or "").lower() == "close", "Connection: close")
    t.check(b"blocked.example.test" in r.body, "body names the host: %r" % r.body)
    t.check(up.accepts == 0, "the upstream was contacted")
    def table(path):
        st, body = vg.admin_get(path)
        return json.loads(body) if st == 200 else []

    rows = t.wait_for(lambda: table("/v1/blocked-hosts"))
    t.check(any(x.get("host") == "blocked.example.test" and x.get("seen_count") == 1
                for x in rows), "blocked_host_log rows: %r" % rows)
    # counts after the first block are flushed at least every second
    routes = t.wait_for(lambda: table("/v1/egress-routes"))
    t.check(any(x.get("host") == "blocked.example.test" and x.get("route") == "refused"
                for x in routes), "egress_route_log rows: %r" % routes)
    st, m = vg.admin_get("/metrics")
    t.check(b"vaultgate_blocked_total 1" in m, "blocked_total metric")
finally:
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s" % rc)
t.check("/upload" not in vg.stderr() and "token=abc" not in vg.stderr(), "path in the log")
