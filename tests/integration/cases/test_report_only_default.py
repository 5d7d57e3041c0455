#!/usr/bin/env python3
"""Report-only in default routing (SPEC §12, §4): a vault with an allow default, an exact block
entry and `host_policy.enforce: false` stays in default routing (`vaultgate check` says so, with
the report-only note). The block entry is designated, so it is inside the CA's name constraints:
over the TLS listener, and through the explicit proxy's CONNECT, it is intercepted and the request
forwarded without any credential (the upstream asserts the exact head), counted `reported`, never
tunnelled blind. A name the vault does not list is still refused at the handshake
(`unrecognized_name`, no certificate outside the constraints), as in an enforcing vault.

Why this can fail: on a build without report-only the vault is invalid; with the block enforced,
the CONNECT is answered 403 and the TLS request too."""
import json
import socket
import ssl
import subprocess
import vgtest as t

t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["blocked.example.test", "api.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)
vault = t.example_vault(hosts={"blocked.example.test": "block"})
vault["host_policy"]["enforce"] = False
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"], proxy=True, audit="sqlite",
                 pins=[up.pin("blocked.example.test"), up.pin("api.example.test")])
try:
    p = subprocess.run([t.VG_BIN, "check", "--vault", vg.vault_path], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    t.check(p.returncode == 0 and "\nmode: default\n" in p.stdout and
            "note: report-only: refusals are recorded, not enforced" in p.stdout,
            "check: %d %r %r" % (p.returncode, p.stdout, p.stderr))
    vg.start()
    st = vg.status()
    t.check(st["mode"] == "default" and st["enforcement"] == "degraded" and
            "report-only: 0 requests would have been refused" in st["warnings"], "status %r" % st)

    n = len(up.requests)
    r = vg.request("blocked.example.test", b"GET /t HTTP/1.1\r\nHost: blocked.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 200, "TLS listener: %r" % r)
    t.check(len(up.requests) == n + 1 and up.requests[-1].raw_head ==
            b"GET /t HTTP/1.1\r\nHost: blocked.example.test\r\n\r\n",
            "TLS head %r" % up.requests[-1:])

    # CONNECT through the explicit proxy: intercepted with the run's CA (not the upstream's)
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=10)
    s.sendall(b"CONNECT blocked.example.test:443 HTTP/1.1\r\nHost: blocked.example.test:443\r\n"
              b"\r\n")
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        t.check(b != b"", "CONNECT: closed after %r" % head)
        head += b
    t.check(head.startswith(b"HTTP/1.1 200"), "CONNECT answered %r" % head)
    tls = vg.client_ctx().wrap_socket(s, server_hostname="blocked.example.test")
    n = len(up.requests)
    tls.sendall(b"GET /c HTTP/1.1\r\nHost: blocked.example.test\r\nConnection: close\r\n\r\n")
    r, _ = t.parse_response(t.read_until_close(tls))
    tls.close()
    t.check(r.status == 200, "CONNECT request: %r" % r)
    t.check(len(up.requests) == n + 1 and up.requests[-1].raw_head ==
            b"GET /c HTTP/1.1\r\nHost: blocked.example.test\r\n\r\n",
            "CONNECT head %r" % up.requests[-1:])

    # a name the vault does not list: refused at the handshake, as when enforcing
    accepts = up.accepts
    try:
        vg.exchange("unlisted.example.test", b"GET / HTTP/1.1\r\nHost: unlisted.example.test"
                    b"\r\n\r\n")
        t.fail("a handshake for a name outside the CA's constraints succeeded")
    except ssl.SSLError as e:
        t.check("UNRECOGNIZED_NAME" in str(e).upper(), "handshake error %r" % e)
    t.check(up.accepts == accepts, "an unlisted name reached the upstream")

    st = vg.status()
    t.check("report-only: 2 requests would have been refused" in st["warnings"], "status %r" % st)

    def routes():
        code, body = vg.admin_get("/v1/egress-routes")
        return {(x["host"], x["route"]): x["count"] for x in json.loads(body)} if code == 200 \
            else {}
    want = {("blocked.example.test", "reported"): 2}
    got = t.wait_for(lambda: (lambda r: r if r == want else None)(routes()), timeout=10)
    t.check(got == want, "routes %r" % routes())
finally:
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s" % rc)
