#!/usr/bin/env python3
"""The explicit-proxy listener: CONNECT to a rule's host is intercepted (the secret injected,
curl -x trusting the run's CA); CONNECT to an allowed host the vault does not designate is
tunnelled untouched in default routing (the client sees the real upstream certificate) after
its SNI was checked against the CONNECT host; a blocked host or a port other than 443/80 is
refused 403 and recorded; CONNECT to 80 carries plain HTTP for that host only; absolute-form
http:// requests are forwarded (port 80 only)."""
import json
import socket
import ssl
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test", "free.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)
up80 = t.FakeUpstream(None, None, t.echo_handler, port=80, tls=False)
vault = t.example_vault(hosts={"blocked.example.test": "block", "free.example.test": "allow"})
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"], proxy=True, audit="sqlite",
                 pins=[up.pin("api.example.test"), up.pin("free.example.test"),
                       up80.pin("free.example.test").replace(":443:", ":80:")]).start()


def proxy_raw(data, timeout=5):
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except (socket.timeout, ConnectionResetError):
        pass
    s.close()
    return out


def connect(host, port=443):
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port))
    buf = b""
    while b"\r\n\r\n" not in buf:
        b = s.recv(1)
        if not b:
            break
        buf += b
    return s, buf


try:
    st = vg.status()
    t.check("proxy 127.0.0.1:%d" % vg.proxy_port in st["listeners"], "listeners %r" % st)
    # intercepted, with curl as an HTTPS_PROXY client
    p = t.subprocess.run(["curl", "-sS", "--max-time", "20", "-x",
                          "http://127.0.0.1:%d" % vg.proxy_port, "--cacert", vg.ca,
                          "https://api.example.test/v1/x", "-H",
                          "Authorization: Bearer placeholder"],
                         stdout=t.subprocess.PIPE, stderr=t.subprocess.PIPE)
    t.check(p.returncode == 0, "curl -x: %s" % p.stderr.decode())
    t.check(up.requests[-1].header("Authorization") == ["Bearer " + SECRET], "not injected")
    t.check(SECRET.encode() not in p.stdout, "secret reflected")
    # intercepted CONNECT whose ClientHello has no SNI: the CONNECT host names the leaf
    s, head = connect(b"api.example.test")
    ctx0 = ssl.create_default_context(cafile=vg.ca)
    ctx0.check_hostname = False
    ts = ctx0.wrap_socket(s, server_hostname=None)
    san = ts.getpeercert().get("subjectAltName")
    t.check(san == (("DNS", "api.example.test"),), "leaf without SNI: %r" % (san,))
    ts.sendall(b"GET /nosni HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n")
    r, _ = t.parse_response(b"", reader=lambda: ts.recv(65536))
    ts.close()
    t.check(r.status == 200 and up.requests[-1].target == "/nosni", "no-SNI CONNECT %r" % r)
    # CONNECT and ClientHello in one write (no wait for the 200): nothing of it may be lost
    inc, outg = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ssl.create_default_context(cafile=vg.ca).wrap_bio(inc, outg,
                                                              server_hostname="api.example.test")
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    s.sendall(b"CONNECT api.example.test:443 HTTP/1.1\r\nHost: api.example.test:443\r\n\r\n" +
              outg.read())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, _, rest = buf.partition(b"\r\n\r\n")
    t.check(head.startswith(b"HTTP/1.1 200"), "early CONNECT %r" % head)
    inc.write(rest)
    while True:
        try:
            tls.do_handshake()
            break
        except ssl.SSLWantReadError:
            out = outg.read()
            if out:
                s.sendall(out)
            inc.write(s.recv(65536))
    s.sendall(outg.read())
    tls.write(b"GET /early HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n")
    s.sendall(outg.read())
    got = b""
    while True:
        try:
            x = tls.read(65536)
            if not x:
                break
            got += x
        except ssl.SSLWantReadError:
            d_ = s.recv(65536)
            if not d_:
                break
            inc.write(d_)
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            break
    s.close()
    r, _ = t.parse_response(got)
    t.check(r.status == 200 and up.requests[-1].target == "/early", "early CONNECT %r" % r)
    # intercepted CONNECT with an SNI naming another host: refused
    s, head = connect(b"api.example.test")
    try:
        ssl.create_default_context(cafile=vg.ca).wrap_socket(
            s, server_hostname="free.example.test").close()
        t.fail("intercepted CONNECT accepted a foreign SNI")
    except ssl.SSLError as e:
        t.check("UNRECOGNIZED_NAME" in str(e).upper(), "alert %s" % e)
    # tunnelled: the client talks TLS with the real upstream (its own CA), nothing rewritten
    n = len(up.requests)
    s, head = connect(b"free.example.test")
    t.check(head.startswith(b"HTTP/1.1 200"), "CONNECT free: %r" % head)
    ctx = ssl.create_default_context(cafile=certs["ca"])
    ts = ctx.wrap_socket(s, server_hostname="free.example.test")
    ts.sendall(b"GET /t HTTP/1.1\r\nHost: free.example.test\r\nAuthorization: Bearer mine\r\n"
               b"Connection: close\r\n\r\n")
    r, _ = t.parse_response(b"", reader=lambda: ts.recv(65536))
    ts.close()
    t.check(r.status == 200, "tunnel %r" % r)
    t.check(up.requests[n].raw == b"GET /t HTTP/1.1\r\nHost: free.example.test\r\n"
            b"Authorization: Bearer mine\r\nConnection: close\r\n\r\n",
            "tunnel bytes changed: %r" % up.requests[n].raw)
    # tunnel with an SNI other than the CONNECT host: closed, nothing relayed
    n = len(up.requests)
    s, head = connect(b"free.example.test")
    ctx2 = ssl.create_default_context(cafile=certs["ca"])
    try:
        ctx2.wrap_socket(s, server_hostname="api.example.test").close()
        t.fail("tunnel with a foreign SNI was opened")
    except (ssl.SSLError, OSError):
        pass
    t.check(len(up.requests) == n, "request relayed through a mismatched tunnel")
    # refusals
    for req, host in ((b"CONNECT blocked.example.test:443 HTTP/1.1\r\nHost: "
                       b"blocked.example.test:443\r\n\r\n", "blocked.example.test"),
                      (b"CONNECT api.example.test:22 HTTP/1.1\r\nHost: api.example.test:22\r\n"
                       b"\r\n", "api.example.test"),
                      (b"GET http://free.example.test:8080/ HTTP/1.1\r\nHost: "
                       b"free.example.test:8080\r\n\r\n", "free.example.test")):
        r, _ = t.parse_response(proxy_raw(req))
        t.check(r.status == 403 and "http_request_denied" in (r.header("Proxy-Status") or ""),
                "%r -> %r" % (req, r))
    rows = t.wait_for(lambda: (lambda r: r if len(r) >= 3 else None)(
        json.loads(vg.admin_get("/v1/blocked-hosts")[1]))) or \
        json.loads(vg.admin_get("/v1/blocked-hosts")[1])
    hosts = sorted(x["host"] for x in rows)
    t.check(hosts == ["api.example.test", "blocked.example.test", "free.example.test"],
            "blocked rows %r" % rows)
    # absolute-form http://: a rule's host goes over TLS with the secret, others to port 80
    r, _ = t.parse_response(proxy_raw(b"GET http://api.example.test/abs?q=1 HTTP/1.1\r\nHost: "
                                      b"api.example.test\r\nConnection: close\r\n\r\n"))
    t.check(r.status == 200 and up.requests[-1].target == "/abs?q=1" and
            up.requests[-1].header("Authorization") == ["Bearer " + SECRET], "abs rule %r" % r)
    r, _ = t.parse_response(proxy_raw(b"GET http://free.example.test/p HTTP/1.1\r\nHost: "
                                      b"free.example.test\r\nConnection: close\r\n\r\n"))
    t.check(r.status == 200 and up80.requests and up80.requests[-1].raw ==
            b"GET /p HTTP/1.1\r\nHost: free.example.test\r\n\r\n", "abs plain %r" % r)
    r, _ = t.parse_response(proxy_raw(b"GET /origin HTTP/1.1\r\nHost: free.example.test\r\n\r\n"))
    t.check(r.status == 400, "origin-form on the proxy %r" % r)
    # CONNECT to 80: plain HTTP for that host only
    s, head = connect(b"api.example.test", 80)
    t.check(head.startswith(b"HTTP/1.1 200"), "CONNECT :80 %r" % head)
    s.sendall(b"GET /c80 HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    r, buf = t.parse_response(b"", reader=lambda: s.recv(65536))
    t.check(r.status == 200 and up.requests[-1].target == "/c80" and
            up.requests[-1].header("Authorization") == ["Bearer " + SECRET], "CONNECT 80 %r" % r)
    s.sendall(b"GET /x HTTP/1.1\r\nHost: free.example.test\r\n\r\n")
    r, buf = t.parse_response(buf, reader=lambda: s.recv(65536))
    t.check(r.status == 421, "other host inside CONNECT :80 %r" % r)
    s.close()
finally:
    rc = vg.stop()
    up.stop()
    up80.stop()
t.check(rc == 0, "exit %s" % rc)
t.check(SECRET not in vg.stderr(), "secret in the log")
