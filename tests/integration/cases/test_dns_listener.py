#!/usr/bin/env python3
"""`vaultgate run --listen-dns` (SPEC §12): vaultgate answers every DNS query itself and never
forwards one. With real clients - dig (bind9-dnsutils) over UDP and TCP, IPv4 and ::1, and the C
library's resolver (getent ahosts, Python's getaddrinfo) reading a resolv.conf bind-mounted over
/etc/resolv.conf in a mount namespace - and with raw packets for what no client sends:
- A -> one record, TTL 5: --dns-answer, else the address the query arrived on (a wildcard
  listener answers 127.0.0.9 with 127.0.0.9 and 127.0.0.1 with 127.0.0.1, from that address);
  over ::1 without an IPv4 --dns-answer, no record; AAAA -> --dns-answer IPv6 or NODATA;
  HTTPS/SVCB/MX -> NODATA; PTR and names under in-addr.arpa/ip6.arpa, names that are not host
  names -> NXDOMAIN; probe.vaultgate.invalid TXT -> the run id, and after a reload that changes
  run.id, the new one; malformed and two questions -> FORMERR; opcodes STATUS/NOTIFY/UPDATE ->
  NOTIMP; a response or a runt is not answered;
- vaultgate_dns_queries_total{type,rcode} counts them; no name in the log (debug included) nor in
  the metrics; no audit row; /v1/status lists "dns <address>";
- usage errors exit 2, and a DNS address whose UDP port another socket holds exits 4 naming it.

Everything runs in a network namespace holding only loopback, so port 53 is free and no query
could reach a real resolver.

Why this can fail: before the DNS listener existed `--listen-dns` was an unknown option (exit 2);
an implementation on libevent 2.1's evdns server would give no NOTIMP, no FORMERR and no TCP, and
a wildcard listener answering from the wrong address would be ignored by dig."""
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess

import vgtest as t

if not t.isolate_net():
    t.skip("needs a network namespace of its own (port 53 on loopback, no real resolver)")
t.require_binary()
if not shutil.which("dig"):
    t.skip("dig missing (Debian bind9-dnsutils; scripts/deps installs it)")

d = t.tmpdir()
CANARY_NAME = "canary-name-4711.data.example.test"
A1 = "127.0.0.53"  # port 53: the C library's resolver knows no other port


def dig(server, port, name, qtype, tcp=False, extra=()):
    """(status, [(name, ttl, type, rdata)], raw output) of one dig query."""
    args = ["dig", "+tries=1", "+time=5", "-p", str(port), "@" + server, "-q", name, "-t", qtype]
    if tcp:
        args.append("+tcp")
    p = subprocess.run(args + list(extra), stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    out = p.stdout.decode(errors="replace")
    m = re.search(r"status: (\w+)", out)
    t.check(m is not None, "dig %s %s @%s:%d: no answer:\n%s" % (name, qtype, server, port, out))
    ans, section = [], False
    for line in out.splitlines():
        if line.startswith(";; ANSWER SECTION"):
            section = True
        elif section and line.strip() == "":
            section = False
        elif section:
            f = line.split(None, 4)
            ans.append((f[0], int(f[1]), f[3], f[4]))
    return m.group(1), ans, out


def raw_query(server, port, packet, tcp=False):
    """Sends packet; returns the answer's bytes (UDP: the first datagram)."""
    fam = socket.AF_INET6 if ":" in server else socket.AF_INET
    if tcp:
        with socket.create_connection((server, port), timeout=10) as s:
            s.sendall(struct.pack("!H", len(packet)) + packet)
            n = struct.unpack("!H", recv_exact(s, 2))[0]
            return recv_exact(s, n)
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        s.settimeout(10)
        s.sendto(packet, (server, port))
        return s.recvfrom(4096)[0]


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        t.check(c, "connection closed after %d of %d bytes" % (len(b), n))
        b += c
    return b


def qname(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".")) + b"\0"


def header(qid, flags=0x0100, qd=1, an=0, ns=0, ar=0):
    return struct.pack("!HHHHHH", qid, flags, qd, an, ns, ar)


def question(name, qtype=1):
    return qname(name) + struct.pack("!HH", qtype, 1)


def parse_header(b):
    qid, flags, qd, an, ns, ar = struct.unpack("!HHHHHH", b[:12])
    return {"id": qid, "qr": flags >> 15, "opcode": (flags >> 11) & 15, "rcode": flags & 15,
            "qd": qd, "an": an, "ns": ns, "ar": ar}


def check_answer(server, port, name, qtype, want_status, want_rdata, tcp=False):
    st, ans, out = dig(server, port, name, qtype, tcp=tcp)
    where = "%s %s @%s:%d%s" % (name, qtype, server, port, " tcp" if tcp else "")
    t.check(st == want_status, "%s: status %s, want %s:\n%s" % (where, st, want_status, out))
    got = [a[3] for a in ans]
    t.check(got == want_rdata, "%s: answer %r, want %r:\n%s" % (where, got, want_rdata, out))
    for a in ans:
        t.check(a[1] == 5 and a[2] == qtype and a[0].rstrip(".") == name,
                "%s: record %r (want TTL 5, the name asked, type %s)" % (where, a, qtype))


# ---- command line ------------------------------------------------------------------------------
vault = t.example_vault(run_id="run-dns-1", default="block")
with open(os.path.join(d, "v.json"), "w") as f:
    json.dump(vault, f)
os.chmod(os.path.join(d, "v.json"), 0o600)
for args, word in ((["--dns-answer", "10.0.0.1", "--dns-answer", "10.0.0.2",
                     "--listen-dns", "127.0.0.1:5300"], "--dns-answer"),
                   (["--dns-answer", "10.0.0.1"], "--dns-answer"),
                   (["--dns-answer", "nope", "--listen-dns", "127.0.0.1:5300"], "--dns-answer"),
                   (["--listen-dns", "localhost:53"], "--listen-dns"),
                   (["--listen-dns", "127.0.0.1"], "--listen-dns")):
    p = subprocess.run([t.VG_BIN, "run", "--vault", os.path.join(d, "v.json"), "--state-dir",
                        os.path.join(d, "cl")] + args, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    err = p.stderr.decode(errors="replace")
    t.check(p.returncode == 2 and word in err and len(err.strip().splitlines()) == 1,
            "%r: exit %d, want 2 naming %s: %s" % (args, p.returncode, word, err))

# an address whose UDP port is held (TCP free) fails the start: exit 4, one line naming it
held = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
held.bind(("127.0.0.1", 0))
hport = held.getsockname()[1]
p = subprocess.run([t.VG_BIN, "run", "--vault", os.path.join(d, "v.json"), "--state-dir",
                    os.path.join(d, "fc"), "--audit", "off", "--listen-https",
                    "127.0.0.1:%d" % t.free_port(), "--listen-http", "none", "--admin",
                    "127.0.0.1:%d" % t.free_port(), "--listen-dns", "127.0.0.1:%d" % hport],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
err = p.stderr.decode(errors="replace")
lines = [l for l in err.strip().splitlines() if not l.startswith("{")]
t.check(p.returncode == 4 and ("listener dns 127.0.0.1:%d" % hport) in err and len(lines) == 1, "UDP port in use: exit %d: %s" % (p.returncode, err))
held.close()

# ---- vaultgate without --dns-answer: v4 on port 53, ::1, a wildcard --------------------------
P6, PW = t.free_port(), t.free_port()
vg = t.Vaultgate(d, vault, threads=2, audit="sqlite", log_level="debug",
                 extra=["--listen-dns", "%s:53" % A1, "--listen-dns", "[::1]:%d" % P6,
                        "--listen-dns", "0.0.0.0:%d" % PW]).start()
try:
    st = vg.status()
    for want in ("dns %s:53" % A1, "dns [::1]:%d" % P6, "dns 0.0.0.0:%d" % PW):
        t.check(want in st["listeners"], "/v1/status listeners %r lack %r" % (st["listeners"], want))
    for tcp in (False, True):
        check_answer(A1, 53, "anything.example.test", "A", "NOERROR", [A1], tcp)
        check_answer(A1, 53, CANARY_NAME, "A", "NOERROR", [A1], tcp)
        check_answer(A1, 53, "blocked.example.test", "A", "NOERROR", [A1], tcp)  # policy not asked
        check_answer(A1, 53, "anything.example.test", "AAAA", "NOERROR", [], tcp)
        for qt in ("HTTPS", "SVCB", "MX", "TXT", "NS"):
            check_answer(A1, 53, "api.example.test", qt, "NOERROR", [], tcp)
        check_answer(A1, 53, "probe.vaultgate.invalid", "TXT", "NOERROR", ['"run-dns-1"'], tcp)
        check_answer(A1, 53, "probe.vaultgate.invalid", "A", "NOERROR", [A1], tcp)
        check_answer(A1, 53, "53.0.0.127.in-addr.arpa", "PTR", "NXDOMAIN", [], tcp)
        check_answer(A1, 53, "1.0.0.127.in-addr.arpa", "A", "NXDOMAIN", [], tcp)
        check_answer(A1, 53, "b.a.9.8.ip6.arpa", "AAAA", "NXDOMAIN", [], tcp)
        check_answer(A1, 53, "api.example.test", "PTR", "NXDOMAIN", [], tcp)
        for bad in ("_dmarc.example.test", "under_score.example.test", "x.1.2.3", "lead-.example.test"):
            check_answer(A1, 53, bad, "A", "NXDOMAIN", [], tcp)
        # IPv6: no IPv4 answer to give, and no IPv6 one without --dns-answer
        check_answer("::1", P6, "anything.example.test", "A", "NOERROR", [], tcp)
        check_answer("::1", P6, "anything.example.test", "AAAA", "NOERROR", [], tcp)
        check_answer("::1", P6, "probe.vaultgate.invalid", "TXT", "NOERROR", ['"run-dns-1"'], tcp)
        # the wildcard answers each query with, and from, the address it arrived on
        for a in ("127.0.0.9", "127.0.0.1", "127.1.2.3"):
            check_answer(a, PW, "anything.example.test", "A", "NOERROR", [a], tcp)
    # the answer keeps the query's spelling (0x20), flags and EDNS as a resolver's would
    st_, ans, out = dig(A1, 53, "MiXeD.ExAmPlE.test", "A")
    t.check(ans and ans[0][0] == "MiXeD.ExAmPlE.test.", "case not kept:\n" + out)
    t.check(re.search(r"flags: qr aa rd ra;", out) and "udp: 1232" in out, "flags/EDNS:\n" + out)

    # raw packets: malformed, two questions, other opcodes, responses and runts
    for tcp in (False, True):
        for server, port in ((A1, 53), ("::1", P6)):
            h = parse_header(raw_query(server, port, header(0x1111) + b"\x07trunc", tcp))
            t.check(h["id"] == 0x1111 and h["qr"] and h["rcode"] == 1 and h["an"] == 0,
                    "truncated name: %r" % h)
            two = header(0x2222, qd=2) + question("a.example.test") + question("b.example.test")
            h = parse_header(raw_query(server, port, two, tcp))
            t.check(h["id"] == 0x2222 and h["rcode"] == 1 and h["an"] == 0, "two questions: %r" % h)
            h = parse_header(raw_query(server, port, header(0x2323, qd=0), tcp))
            t.check(h["rcode"] == 1 and h["an"] == 0, "no question: %r" % h)
            loop = header(0x2424) + b"\xc0\x0c" + struct.pack("!HH", 1, 1)  # pointer to itself
            h = parse_header(raw_query(server, port, loop, tcp))
            t.check(h["rcode"] == 1 and h["an"] == 0, "compression loop: %r" % h)
            for opcode in (1, 2, 4, 5):
                q = header(0x3300 + opcode, flags=opcode << 11) + question("a.example.test")
                h = parse_header(raw_query(server, port, q, tcp))
                t.check(h["id"] == 0x3300 + opcode and h["rcode"] == 4 and h["opcode"] == opcode
                        and h["an"] == 0, "opcode %d: %r" % (opcode, h))
    # a response (QR set) and a runt get no answer: the next answer on the socket is the query's
    for junk in (header(0x4444, flags=0x8180) + question("a.example.test"), b"\x12\x34\x01"):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.settimeout(10)
            s.sendto(junk, (A1, 53))
            s.sendto(header(0x5555) + question("a.example.test"), (A1, 53))
            h = parse_header(s.recvfrom(4096)[0])
            t.check(h["id"] == 0x5555 and h["an"] == 1, "junk %r was answered: %r" % (junk, h))
    # TCP: a response closes the connection without an answer
    with socket.create_connection((A1, 53), timeout=10) as s:
        r = header(0x4545, flags=0x8180) + question("a.example.test")
        s.sendall(struct.pack("!H", len(r)) + r)
        t.check(s.recv(10) == b"", "a response over TCP was answered")
    # TCP: several queries in one segment are all answered, in order
    with socket.create_connection((A1, 53), timeout=10) as s:
        qs = [header(0x6000 + i) + question("n%d.example.test" % i) for i in range(5)]
        s.sendall(b"".join(struct.pack("!H", len(q)) + q for q in qs))
        for i in range(5):
            n = struct.unpack("!H", recv_exact(s, 2))[0]
            h = parse_header(recv_exact(s, n))
            t.check(h["id"] == 0x6000 + i and h["an"] == 1, "pipelined %d: %r" % (i, h))

    # the C library's resolver, pointed at vaultgate by /etc/resolv.conf in a mount namespace
    rc = os.path.join(d, "resolv.conf")
    with open(rc, "w") as f:
        f.write("nameserver %s\noptions attempts:1 timeout:5\n" % A1)
    script = ('mount --bind "$0" /etc/resolv.conf && getent ahosts lib.example.test && '
              'exec python3 -c "import socket; print(sorted({a[4][0] for a in '
              'socket.getaddrinfo(\'py.example.test\', 443)}))"')
    p = subprocess.run(["unshare", "-m", "--", "sh", "-c", script, rc], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=60)
    out = p.stdout.decode(errors="replace")
    t.check(p.returncode == 0, "getent/getaddrinfo: %s %s" % (out, p.stderr))
    t.check(re.search(r"^%s\s+STREAM lib\.example\.test" % re.escape(A1), out, re.M) and
            ":" not in out.split("\n")[0], "getent ahosts:\n" + out)
    t.check("['%s']" % A1 in out, "getaddrinfo:\n" + out)

    # a reload that changes run.id changes the probe's TXT
    vault2 = dict(vault, run={"id": "run-dns-2", "user": "u-test"})
    with open(vg.vault_path, "w") as f:
        json.dump(vault2, f)
    vg.proc.send_signal(signal.SIGHUP)
    t.check(t.wait_for(lambda: dig(A1, 53, "probe.vaultgate.invalid", "TXT")[1][:1] and
                       dig(A1, 53, "probe.vaultgate.invalid", "TXT")[1][0][3] == '"run-dns-2"',
                       timeout=30), "the TXT did not follow the reload")

    m = t.metrics_text(vg)
    for labels, least in (('type="A",rcode="noerror"', 20), ('type="AAAA",rcode="noerror"', 4),
                          ('type="HTTPS",rcode="noerror"', 2), ('type="SVCB",rcode="noerror"', 2),
                          ('type="TXT",rcode="noerror"', 6), ('type="PTR",rcode="nxdomain"', 4),
                          ('type="A",rcode="nxdomain"', 10), ('type="other",rcode="formerr"', 8),
                          ('type="other",rcode="notimp"', 16), ('type="other",rcode="noerror"', 4)):
        v = t.metric_value(m, "vaultgate_dns_queries_total{%s}" % labels)
        t.check(v is not None and v >= least, "dns_queries_total{%s} = %r, want >= %d" %
                (labels, v, least))
    t.check(CANARY_NAME not in m and "example.test" not in m, "a name in /metrics")
    # info and debug lines leave a worker once per loop turn: waited for, not read at once
    t.check(t.wait_for(lambda: vg.events("dns_query")), "no dns_query line at debug")
finally:
    rc_ = vg.stop()
t.check(rc_ == 0, "vaultgate exited %r" % rc_)
err = vg.stderr()
t.check(CANARY_NAME not in err and "canary-name" not in err and "data.example" not in err,
        "a queried name is in the log (debug level)")
for table in ("blocked", "routes"):
    rows = t.audit_rows(vg, table, run_id="run-dns-1") + t.audit_rows(vg, table, run_id="run-dns-2")
    t.check(rows == [], "audit %s rows for lookups: %r" % (table, rows))

# ---- vaultgate with --dns-answer, at info level --------------------------------------------
P4b, P6b = t.free_port(), t.free_port()
d2 = os.path.join(d, "two")
os.makedirs(d2)
vg2 = t.Vaultgate(d2, vault, extra=["--listen-dns", "127.0.0.1:%d" % P4b, "--listen-dns",
                                    "[::1]:%d" % P6b, "--dns-answer", "10.9.8.7",
                                    "--dns-answer", "2001:db8::7"]).start()
try:
    for tcp in (False, True):
        for server, port in (("127.0.0.1", P4b), ("::1", P6b)):
            check_answer(server, port, "x.example.test", "A", "NOERROR", ["10.9.8.7"], tcp)
            check_answer(server, port, "x.example.test", "AAAA", "NOERROR", ["2001:db8::7"], tcp)
            check_answer(server, port, "x.example.test", "HTTPS", "NOERROR", [], tcp)
            check_answer(server, port, "x.example.test", "PTR", "NXDOMAIN", [], tcp)
            h = parse_header(raw_query(server, port, header(7, flags=5 << 11) + question("a.b"),
                                       tcp))
            t.check(h["rcode"] == 4, "NOTIMP with --dns-answer: %r" % h)
finally:
    vg2.stop()
t.check(vg2.events("dns_query") == [], "dns_query lines above debug")
