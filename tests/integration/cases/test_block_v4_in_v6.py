#!/usr/bin/env python3
"""A block entry for an IPv4 address also blocks that address written as an IPv6 literal (SPEC §3:
mapped ::ffff:a.b.c.d, compatible ::a.b.c.d, NAT64 64:ff9b::/96, local-use NAT64 64:ff9b:1::/48,
6to4 2002::/16), on every listener and in every way a client can name a host:
- TLS listener: the IPv6 literal as SNI (against RFC 6066, but a client can send it; catch-all
  routing intercepts every name), with the same literal in Host;
- plain-HTTP listener: the literal in Host;
- explicit proxy: CONNECT [literal]:443, CONNECT [literal]:80, absolute-form http://[literal]/.
Each is answered 403 `http_request_denied` ("host blocked by policy", the body naming the IPv4
host), a witness listening on the IPv4 address on 443 and 80 sees no connection, and the audit
store holds one blocked_host_log row, keyed by the IPv4 host, counting every refusal. For
contrast, on the TLS listener a Host naming the blocked address under another SNI is 421.

Why this can fail: --allow-private 127.0.0.0/8 makes the blocked loopback address dialable, so a
vaultgate that decided on the IPv6 text (which no entry names) forwarded the mapped form to the
witness; the other forms were refused only by the address rule (403 destination_ip_prohibited,
recorded under the IPv6 text) - wrong reason, wrong row, and no refusal at all for an address the
rule allows."""
import ipaddress
import socket
import subprocess
import vgtest as t

if not t.isolate_net():
    t.skip("needs a network namespace of its own (witnesses on ports 80 and 443)")
t.require_binary()
d = t.tmpdir()
W = "127.0.0.%d" % t.random.randint(20, 250)
w4 = ipaddress.IPv4Address(W).packed


def v6(b):
    return str(ipaddress.IPv6Address(bytes(b)))


FORMS = {
    "mapped": v6(b"\0" * 10 + b"\xff\xff" + w4),
    "compatible": v6(b"\0" * 12 + w4),
    "nat64": v6(b"\x00\x64\xff\x9b" + b"\0" * 8 + w4),
    # RFC 6052 /48 layout: bits 48-63, then the u octet, then bits 72-87
    "nat64-local": v6(b"\x00\x64\xff\x9b\x00\x01" + w4[:2] + b"\0" + w4[2:] + b"\0" * 5),
    "6to4": v6(b"\x20\x02" + w4 + b"\x12\x34" + b"\0" * 7 + b"\x01"),
}
witnesses = [t.Witness(W, 443), t.Witness(W, 80)]
vault = t.example_vault(hosts={W: "block", "*.catchall.example.test": "block"})
vg = t.Vaultgate(d, vault, http=True, proxy=True, audit="sqlite",
                 extra=["--allow-private", "127.0.0.0/8"]).start()
problems = []
refusals = 0


def send(port, data):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    out = t.read_until_close(s)
    s.close()
    return out


def tls_send(sni, data):
    """TLS to the HTTPS listener with sni as the SNI, whatever it is (python's ssl sends no IP
    literal as SNI; s_client sends what it is given)."""
    p = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % vg.port,
                        "-servername", sni, "-quiet"],
                       input=data, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=20)
    return p.stdout


def expect(what, out, status=403):
    global refusals
    try:
        r = t.parse_response(out)[0]
    except (EOFError, ValueError, IndexError):
        problems.append("%s: no HTTP answer: %r" % (what, out[:200]))
        return
    ps = r.header("Proxy-Status") or ""
    if r.status != status:
        problems.append("%s: %d %r, wanted %d" % (what, r.status, ps, status))
        return
    if status == 403:
        refusals += 1
        if "error=http_request_denied" not in ps or W.encode() not in r.body:
            problems.append("%s: 403 for another reason: %r %r (wanted http_request_denied, "
                            "the body naming %s)" % (what, ps, r.body, W))


try:
    for name, lit in sorted(FORMS.items()):
        br = "[%s]" % lit
        expect("TLS listener, SNI %s (%s)" % (lit, name),
               tls_send(lit, b"GET /p HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
                        br.encode()))
        expect("plain-HTTP listener, Host %s (%s)" % (br, name),
               send(vg.http_port, b"GET /p HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
                    br.encode()))
        for port in (443, 80):
            expect("CONNECT %s:%d (%s)" % (br, port, name),
                   send(vg.proxy_port, b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" %
                        (br.encode(), port, br.encode(), port)))
        expect("absolute-form http://%s/ (%s)" % (br, name),
               send(vg.proxy_port, b"GET http://%s/p HTTP/1.1\r\nHost: %s\r\nConnection: close"
                    b"\r\n\r\n" % (br.encode(), br.encode())))
    # the TLS listener's host is the SNI: a Host naming the blocked address under another name
    # is misdirected, never a way to that address
    expect("TLS listener, SNI a.catchall2.example.test, Host [%s]" % FORMS["mapped"],
           tls_send("a.catchall2.example.test", b"GET /p HTTP/1.1\r\nHost: [%s]\r\nConnection: "
                    b"close\r\n\r\n" % FORMS["mapped"].encode()), status=421)
    for w in witnesses:
        if w.accepts:
            problems.append("the witness on %s:%d got %d connection(s): a blocked host was "
                            "dialled" % (w.addr, w.port, w.accepts))
finally:
    rc = vg.stop()
    for w in witnesses:
        w.stop()
if problems:
    t.fail("\n  ".join(["an IPv6 spelling of a blocked IPv4 host got through:"] + problems))
t.check(rc == 0, "exit %s" % rc)
rows = t.audit_rows(vg, "blocked")
t.check([(x["host"], x["seen_count"]) for x in rows] == [(W, refusals)],
        "blocked_host_log %r, wanted one row for %s counting %d refusals" % (
            [(x["host"], x["seen_count"]) for x in rows], W, refusals))
routes = [(x["host"], x["route"], x["count"]) for x in t.audit_rows(vg, "routes")]
t.check(routes == [(W, "refused", refusals)], "egress_route_log %r" % routes)
