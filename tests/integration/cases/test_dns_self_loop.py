#!/usr/bin/env python3
"""vaultgate never dials its own listeners (upstream.c: "vaultgate's own listener endpoints are
never dialled"; SPEC §4 lists "one of vaultgate's own" addresses among the prohibited
destinations), also when a listener is bound to a wildcard address, which makes it reachable
on every loopback address, not only on the 127.0.0.1 that getifaddrs() lists.

Setup (in a network namespace of its own, so ports 80 and 443 are free): --listen-http
0.0.0.0:80 and --listen-https 0.0.0.0:443 next to the usual loopback listeners,
--allow-private 127.0.0.0/8, and a loopback DNS server where self1 answers 127.0.0.1 and self2 /
self3 answer 127.0.0.2 / 127.0.0.3 (no --resolve pins).
- self1 (127.0.0.1:80, the listed endpoint of the plain listener's wildcard) is refused 403 -
  the exact-endpoint case, which works;
- self3, a rule host over TLS (upstream 127.0.0.3:443 = vaultgate's own wildcard TLS listener,
  the only thing listening there in the namespace) must be refused 403 the same way, not dialled
  (a dial shows as 502 tls_certificate_error: vaultgate's own leaf fails upstream verification);
- self2 over the plain-HTTP listener (upstream 127.0.0.2:80 = vaultgate's own wildcard plain
  listener) likewise, without vaultgate accepting a connection from itself: exactly one request
  is counted for the one the client sent, and nothing is logged by the wildcard listeners, which
  the client never uses. Last, because a loop exhausts the descriptors.

Why this can fail: a vaultgate that matches its own endpoints by exact address only dials
127.0.0.2:80, reaches itself, resolves the same name again and dials itself again - one client
request becomes thousands of nested requests until descriptors run out (observed: ~11000 request
events, the client answered nothing within 3 s, or a 502 proxy_internal_error after ~1.5 s)."""
import socket
import vgtest as t
from dnsserver import DnsServer

if not t.isolate_net():
    t.skip("needs a network namespace of its own (ports 80 and 443 on 0.0.0.0)")
t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["self3.example.test"])
dns = DnsServer({"self1.example.test": ["127.0.0.1"], "self2.example.test": ["127.0.0.2"],
                 "self3.example.test": ["127.0.0.3"]}).start()
vault = t.example_vault(rules=[{"host_pattern": "self3.example.test", "secret": "API_KEY",
                                "scheme": "bearer"}])
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"], http=True,
                 extra=["--dns-server", dns.server, "--allow-private", "127.0.0.0/8",
                        "--listen-http", "0.0.0.0:80", "--listen-https", "0.0.0.0:443"]).start()
problems = []


def own_listener_events():
    """Events logged by the wildcard listeners: the client never talks to them, so any such
    event is a connection from vaultgate to itself."""
    return [e for e in vg.events() if e.get("event") != "listen" and
            str(e.get("listener", "")).endswith(("0.0.0.0:80", "0.0.0.0:443"))]


def requests_counted():
    m = t.metrics_text(vg)
    return sum(float(l.rsplit(" ", 1)[1]) for l in m.splitlines()
               if l.startswith("vaultgate_requests_total{"))


def plain_get(name):
    s = socket.create_connection(("127.0.0.1", vg.http_port), timeout=30)
    s.sendall(b"GET /loop HTTP/1.1\r\nHost: " + name.encode() + b"\r\nConnection: close\r\n\r\n")
    out = t.read_until_close(s)
    s.close()
    try:
        return t.parse_response(out)[0], out
    except (EOFError, ValueError):
        return None, out


def refused(r):
    return (r is not None and r.status == 403 and
            "destination_ip_prohibited" in (r.header("Proxy-Status") or ""))


try:
    # 1. the listed endpoint 127.0.0.1:80: refused (works)
    r, out = plain_get("self1.example.test")
    t.check(refused(r), "self1 (127.0.0.1:80, vaultgate's own): %r" % (r or out[:120]))
    t.check(requests_counted() == 1 and not own_listener_events(), "self1 looped: %r %r" %
            (requests_counted(), own_listener_events()[:2]))
    # 2. TLS: 127.0.0.3:443 is the wildcard TLS listener
    r = vg.request("self3.example.test", b"GET /loop HTTP/1.1\r\nHost: self3.example.test\r\n"
                   b"Connection: close\r\n\r\n", timeout=5)
    own = own_listener_events()
    if not refused(r):
        problems.append("self3.example.test (127.0.0.3:443, own wildcard TLS listener): %d %r, "
                        "wanted 403 destination_ip_prohibited" % (r.status, r.header("Proxy-Status")))
    if own:
        problems.append("self3.example.test: %d event(s) on the wildcard TLS listener, which the "
                        "client never uses: vaultgate connected to itself (%r)" % (len(own), own[0]))
    # 3. plain HTTP: 127.0.0.2:80 is the wildcard plain listener - last, a loop exhausts fds
    n0, c0 = len(own), requests_counted()
    r, out = plain_get("self2.example.test")
    t.wait_for(lambda: requests_counted() > c0, timeout=30)
    own = own_listener_events()
    if not refused(r):
        problems.append("self2.example.test (127.0.0.2:80, own wildcard plain listener): %r, "
                        "wanted 403 destination_ip_prohibited" % (r or out[:120]))
    if len(own) > n0 or requests_counted() != c0 + 1:
        problems.append("self2.example.test: %d requests counted for 1, %d event(s) on the "
                        "wildcard listeners: vaultgate dialled itself, recursively" %
                        (requests_counted() - c0, len(own) - n0))
finally:
    rc = vg.stop()
    dns.stop()
t.log("%d request events in vaultgate's log" % len(vg.events("request")))
if problems:
    t.fail("\n  ".join(["vaultgate dials its own wildcard listeners:"] + problems))
t.check(rc == 0, "exit %s" % rc)
