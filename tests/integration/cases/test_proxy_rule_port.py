#!/usr/bin/env python3
"""Absolute-form on the explicit proxy to a rule's host naming another port
(`http://api.example.test:8080/`): served like any request to that host - over TLS to port 443
with the secret injected - because every request to a rule's host goes to 443 whatever port it
names (SPEC §4). A host without a rule on a port other than 80 stays refused (403, recorded).

Why this can fail: refusing every absolute-form port but 80 before the decision answers 403 to
the rule's host; dialling the named port would send the request (and the secret) elsewhere."""
import socket
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"

d, certs, up, vg = t.setup(handler=t.echo_handler, proxy=True, audit="sqlite")
try:
    for port in (8080, 8443, 80):
        s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
        s.sendall(b"GET http://api.example.test:%d/v1/x?q=1 HTTP/1.1\r\nHost: "
                  b"api.example.test:%d\r\nAuthorization: Bearer placeholder\r\n"
                  b"Connection: close\r\n\r\n" % (port, port))
        r, _ = t.parse_response(b"", reader=lambda: s.recv(65536))
        s.close()
        t.check(r.status == 200, "port %d: %r" % (port, r))
        req = up.requests[-1]
        t.check(req.target == "/v1/x?q=1", "port %d: target %r" % (port, req.target))
        t.check(req.header("Authorization") == ["Bearer " + SECRET], "port %d: not injected" % port)
        t.check(req.header("Host") == ["api.example.test"], "port %d: Host %r" %
                (port, req.header("Host")))
    t.check(up.port == 443, "the fake upstream listens on 443")
    # no rule: another port is refused, recorded
    n = len(up.requests)
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    s.sendall(b"GET http://other.example.test:8080/ HTTP/1.1\r\nHost: other.example.test:8080"
              b"\r\n\r\n")
    r, _ = t.parse_response(b"", reader=lambda: s.recv(65536))
    s.close()
    t.check(r.status == 403, "other host on 8080: %r" % r)
    t.check(len(up.requests) == n, "the refused request reached an upstream")
finally:
    vg.stop()
    up.stop()
t.check(any(row["host"] == "other.example.test" for row in t.audit_rows(vg, "blocked")),
        "no blocked_host_log row for the refused port")
t.check(SECRET not in vg.stderr(), "secret in the log")
