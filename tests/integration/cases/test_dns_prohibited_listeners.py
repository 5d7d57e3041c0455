#!/usr/bin/env python3
"""The destination-address rule on every path that dials a DNS-resolved name, not only the TLS
listener: names served by the case's loopback DNS server (no --resolve pin) that answer a
loopback witness address (not exempt) are refused and never dialled when they arrive
- on the plain-HTTP listener (a host without a rule: upstream port 80) -> 403;
- as an absolute-form http:// request on the explicit proxy -> 403;
- as CONNECT host:80 carrying plain HTTP -> 403;
- as CONNECT host:443 to an allowed, non-designated host (tunnelled in default routing): the 200
  is already out, so the tunnel is closed after the ClientHello - nothing relayed;
each one recorded in blocked_host_log (a prohibited destination is a refusal by policy).
The witness listens on both 80 and 443 of the answered address and must see no connection.

Why this can fail: a path that dialled without checking the resolved address reaches the
witness (or, for the plain paths, returns its answer instead of 403)."""
import socket
import ssl
import vgtest as t
from dnsserver import DnsServer

t.log("network namespace of its own: %s" % t.isolate_net())
t.require_binary()
SECRET = "sk-canary-SECRET-api-0001"
W = "127.0.0.%d" % t.random.randint(20, 250)
w80, w443 = t.Witness(W, 80), t.Witness(W, 443)
NAMES = ["plain.example.test", "abs.example.test", "c80.example.test", "tun.example.test"]
dns = DnsServer({n: [W] for n in NAMES}).start()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
vg = t.Vaultgate(d, t.example_vault(), upstream_ca=certs["ca"], http=True, proxy=True,
                 audit="sqlite", extra=["--dns-server", dns.server]).start()


def refused(r, what):
    t.check(r.status == 403 and "destination_ip_prohibited" in (r.header("Proxy-Status") or ""),
            "%s: %r" % (what, r))


def connect(host, port):
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=5)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port))
    head = b""
    while b"\r\n\r\n" not in head:
        x = s.recv(1)
        t.check(x, "CONNECT %s:%d closed" % (host, port))
        head += x
    t.check(head.startswith(b"HTTP/1.1 200"), "CONNECT %s:%d: %r" % (host, port, head))
    return s


try:
    r, _ = t.parse_response(vg.http_exchange(b"GET /x HTTP/1.1\r\nHost: plain.example.test\r\n"
                                             b"Connection: close\r\n\r\n"))
    refused(r, "plain-HTTP listener")
    s = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=5)
    s.sendall(b"GET http://abs.example.test/x HTTP/1.1\r\nHost: abs.example.test\r\n"
              b"Connection: close\r\n\r\n")
    r, _ = t.parse_response(t.read_until_close(s))
    s.close()
    refused(r, "absolute-form on the proxy")
    s = connect(b"c80.example.test", 80)
    s.sendall(b"GET /x HTTP/1.1\r\nHost: c80.example.test\r\nConnection: close\r\n\r\n")
    r, _ = t.parse_response(t.read_until_close(s))
    s.close()
    refused(r, "CONNECT :80")
    s = connect(b"tun.example.test", 443)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    try:
        ctx.wrap_socket(s, server_hostname="tun.example.test").close()
        t.fail("a tunnel to a prohibited address was opened")
    except (ssl.SSLError, OSError):
        pass
    for n in NAMES:
        t.check(dns.counts.get(n, 0) > 0, "%s: no DNS query" % n)
    t.check(w80.accepts == 0 and w443.accepts == 0, "the witness %s was dialled: :80 %d, :443 %d"
            % (W, w80.accepts, w443.accepts))
finally:
    rc = vg.stop()
    w80.stop()
    w443.stop()
    dns.stop()
t.check(rc == 0, "exit %s" % rc)
blocked = sorted(x["host"] for x in t.audit_rows(vg, "blocked"))
t.check(blocked == sorted(NAMES), "blocked_host_log hosts %r, wanted %r" % (blocked, sorted(NAMES)))
