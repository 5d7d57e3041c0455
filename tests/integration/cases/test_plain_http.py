#!/usr/bin/env python3
"""The plain-HTTP listener routes by Host: a rule's host is forwarded over verified TLS to 443
with the secret injected (never over plain HTTP); another allowed host goes to port 80 in plain
HTTP, byte-exact; a blocked host gets 403; Host is required and may carry no port, 80 or the
listener's own port (else 421); requests for different hosts share one keep-alive client
connection."""
import socket
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
up_tls = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)
up_plain = t.FakeUpstream(None, None, t.echo_handler, port=80, tls=False)
vault = t.example_vault(hosts={"blocked.example.test": "block", "free.example.test": "allow"})
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"], http=True,
                 pins=[up_tls.pin("api.example.test"), up_plain.pin("free.example.test"),
                       "api.example.test:80:127.0.0.1"]).start()
try:
    st = vg.status()
    t.check("http 127.0.0.1:%d" % vg.http_port in st["listeners"], "listeners %r" % st)
    out = vg.http_exchange(b"GET /v1/x HTTP/1.1\r\nHost: api.example.test\r\n"
                           b"Authorization: Bearer placeholder\r\nConnection: close\r\n\r\n")
    r, _ = t.parse_response(out)
    t.check(r.status == 200, "rule host over plain HTTP: %r" % r)
    t.check(len(up_tls.requests) == 1 and
            up_tls.requests[0].header("Authorization") == ["Bearer " + SECRET],
            "rule host not forwarded over TLS with the secret")
    t.check(SECRET.encode() not in out, "secret reflected")
    t.check(up_plain.accepts == 0, "a rule host went to port 80")

    want = b"GET /pkg?x=1 HTTP/1.1\r\nHost: free.example.test\r\nAccept: */*\r\n\r\n"
    out = vg.http_exchange(b"GET /pkg?x=1 HTTP/1.1\r\nHost: free.example.test:%d\r\n"
                           b"Accept: */*\r\nConnection: close\r\n\r\n" % vg.http_port)
    r, _ = t.parse_response(out)
    t.check(r.status == 200 and r.body == want, "plain upstream: %r" % r)
    t.check(up_plain.requests[0].raw == want, "plain upstream bytes %r" % up_plain.requests[0].raw)

    for req, st_ in ((b"GET / HTTP/1.1\r\nHost: blocked.example.test\r\n\r\n", 403),
                     (b"GET / HTTP/1.1\r\n\r\n", 400),
                     (b"GET / HTTP/1.0\r\n\r\n", 400),
                     (b"GET / HTTP/1.1\r\nHost: free.example.test:8081\r\n\r\n", 421),
                     (b"GET http://other.example.test/ HTTP/1.1\r\nHost: free.example.test\r\n"
                      b"\r\n", 421)):
        r, _ = t.parse_response(vg.http_exchange(req))
        t.check(r.status == st_, "%r -> %r" % (req, r))

    s = socket.create_connection(("127.0.0.1", vg.http_port), timeout=10)
    buf = b""
    for host in (b"free.example.test", b"api.example.test", b"free.example.test"):
        s.sendall(b"GET /k HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
        r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
        t.check(r.status == 200 and b"Host: " + host in r.body, "keep-alive %r: %r" % (host, r))
    s.close()
finally:
    rc = vg.stop()
    up_tls.stop()
    up_plain.stop()
t.check(rc == 0, "exit %s" % rc)
t.check(SECRET not in vg.stderr(), "secret in the log")
