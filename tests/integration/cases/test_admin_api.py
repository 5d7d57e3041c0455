#!/usr/bin/env python3
"""The admin API (SPEC §7) through tests/tools/admin_serve, which runs proxy/admin.c with fake
ops: every endpoint, query strings that must not change routing (and never reach the log), 405
with Allow for every other method (unknown ones such as FOO included), 404, HEAD, the five
security headers on every answer (also 400 for a malformed request and 431 for a head over
VG_ADMIN_MAX_HEAD_BYTES), keep-alive and pipelining, HTTP/1.0, requests with a body, the unix
socket (mode 0660, removed on stop, reached with curl --unix-socket, any Host served there
while TCP keeps the 421 rule), a store that cannot be
read (503), and the --admin usage check that refuses a non-loopback address."""
import atexit
import http.client
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time

BUILD = os.environ["VG_BUILD"]
SERVE = os.path.join(BUILD, "tests", "tools", "admin_serve")
DRIVE = os.path.join(BUILD, "tests", "tools", "audit_drive")

SECURITY = {
    "content-security-policy": "default-src 'none'",
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}
procs = []


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def stop_all():
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait()


atexit.register(stop_all)


class Server:
    def __init__(self, addr, *extra):
        self.proc = subprocess.Popen([SERVE, addr] + list(extra), stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(self.proc)
        line = self.proc.stdout.readline()
        check(line.startswith("listening "), "admin_serve: %r %s" %
              (line, self.proc.stderr.read() if self.proc.poll() is not None else ""))
        self.address = line.split()[1]

    def stop(self):
        """Closes stdin; the tool must stop cleanly and quickly. Returns its stderr."""
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            fail("admin_serve did not stop within 10 s")
        check(self.proc.returncode == 0, "admin_serve exit %d" % self.proc.returncode)
        return self.proc.stderr.read()


def host_port(address):
    host, port = address.rsplit(":", 1)
    return host.strip("[]"), int(port)


def request(srv, method, path):
    c = http.client.HTTPConnection(*host_port(srv.address), timeout=10)
    c.request(method, path)
    r = c.getresponse()
    body = r.read()
    headers = {k.lower(): v for k, v in r.getheaders()}
    c.close()
    want = dict(SECURITY)
    if path.split("?")[0] == "/" and method in ("GET", "HEAD") and r.status == 200:
        # the status page loads its one same-origin stylesheet, nothing else (SPEC §7)
        want["content-security-policy"] = "default-src 'none'; style-src 'self'"
    for k, v in want.items():
        check(headers.get(k) == v, "%s %s: header %s = %r" % (method, path, k, headers.get(k)))
    return r.status, headers, body


def raw(addr, data, family=socket.AF_INET):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(addr)
    s.sendall(data)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    s.close()
    return out


def endpoints(srv, tmp):
    st, h, body = request(srv, "GET", "/healthz")
    check(st == 200 and body == b"ok\n", "/healthz %d %r" % (st, body))
    st, _, body = request(srv, "GET", "/healthz?probe=1&x=/metrics")
    check(st == 200 and body == b"ok\n", "query string changed /healthz: %d" % st)

    ready = os.path.join(tmp, "ready")
    st, _, _ = request(srv, "GET", "/readyz")
    check(st == 503, "/readyz without readiness: %d" % st)
    open(ready, "w").close()
    st, _, _ = request(srv, "GET", "/readyz")
    check(st == 200, "/readyz when ready: %d" % st)

    st, h, body = request(srv, "GET", "/metrics")
    text = body.decode()
    check(st == 200 and h["content-type"].startswith("text/plain"), "/metrics %d" % st)
    for line in ('vaultgate_requests_total{decision="inject",code_class="2xx"} 1',
                 'vaultgate_requests_total{decision="block",code_class="4xx"} 1',
                 'vaultgate_injections_total{secret="OPENAI_API_KEY"} 1',
                 "vaultgate_blocked_total 1", "vaultgate_connections_active 1",
                 "vaultgate_cert_cache_hits_total 7", "vaultgate_cert_cache_misses_total 3",
                 'vaultgate_request_duration_seconds_bucket{le="+Inf"} 2',
                 "# TYPE vaultgate_request_duration_seconds histogram"):
        check(line in text.splitlines(), "/metrics lacks %r" % line)
    metrics_len = len(body)

    st, h, body = request(srv, "GET", "/v1/status?verbose=1")
    status = json.loads(body)
    check(st == 200 and h["content-type"] == "application/json", "/v1/status %d" % st)
    check(status["version"] == "test" and status["run"]["id"] == "r1", "status %r" % status)

    st, h, body = request(srv, "GET", "/v1/blocked-hosts")
    rows = json.loads(body)
    check(st == 200 and h["content-type"] == "application/json", "/v1/blocked-hosts %d" % st)
    check([r["host"] for r in rows] == ["h0000.example", "h0001.example", "h0002.example"],
          "blocked rows %r" % rows)
    check(all(r["run_id"] == "r1" and r["seen_count"] == 2 for r in rows), "blocked %r" % rows)
    check(set(rows[0]) == {"user_id", "run_id", "host", "seen_count", "first_seen", "last_seen",
                           "source"}, "blocked columns %r" % sorted(rows[0]))
    st, _, body = request(srv, "GET", "/v1/egress-routes")
    rows = json.loads(body)
    check(st == 200 and len(rows) == 3 and rows[0]["route"] == "direct" and
          rows[0]["count"] == 2, "routes %r" % rows)

    st, h, body = request(srv, "GET", "/ca.pem")
    check(st == 200 and h["content-type"] == "application/x-pem-file" and
          body.startswith(b"-----BEGIN CERTIFICATE-----\n"), "/ca.pem %d %r" % (st, body[:40]))

    # Any method but GET and HEAD is 405, known to the parser or not, on any path.
    for method in ("POST", "PUT", "DELETE", "OPTIONS", "PATCH", "TRACE", "FOO", "PROPFIND",
                   "get"):
        for path in ("/healthz", "/v1/status", "/ca.pem", "/nope"):
            st, h, _ = request(srv, method, path)
            check(st == 405 and h.get("allow") == "GET, HEAD", "%s %s: %d allow %r" %
                  (method, path, st, h.get("allow")))
    st, h, body = request(srv, "GET", "/?x=<b>")
    check(st == 200 and h["content-type"] == "text/html; charset=utf-8" and
          body.startswith(b"<!DOCTYPE html>") and b"<script" not in body and
          b'<link rel="stylesheet" href="/status.css">' in body, "/ %d %r" % (st, body[:80]))
    st, h, body = request(srv, "GET", "/status.css")
    check(st == 200 and h["content-type"] == "text/css; charset=utf-8" and b"{" in body,
          "/status.css %d" % st)
    for path in ("/nope", "/healthz/", "/index.html", "/status.css/", "/HEALTHZ", "/v1/status/x", "/v1", "/metrics.txt",
                 "/%68ealthz", "/ca.pem?/healthz/.."):
        st, _, _ = request(srv, "GET", path)
        check(st == 404 or (path.startswith("/ca.pem?") and st == 200), "GET %s: %d" % (path, st))

    # HEAD: the headers of GET, Content-Length included, and not one body byte.
    out = raw(host_port(srv.address), b"HEAD /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    head, _, rest = out.partition(b"\r\n\r\n")
    check(head.startswith(b"HTTP/1.1 200"), "HEAD /metrics: %r" % head[:40])
    check(b"\r\nContent-Length: %d" % metrics_len in head, "HEAD Content-Length: %r" % head)
    check(rest == b"", "HEAD sent a body: %r" % rest[:40])
    st, h, body = request(srv, "HEAD", "/v1/status")
    check(st == 200 and body == b"", "HEAD /v1/status")
    print("ok endpoints, 405/404, HEAD, security headers", flush=True)


def read_response(s, buf=b"", head_only=False):
    """Reads one response from s: (status, headers, body, bytes left over)."""
    while b"\r\n\r\n" not in buf:
        chunk = s.recv(65536)
        check(chunk, "connection closed before a response head: %r" % buf[:80])
        buf += chunk
    head, _, buf = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    check(lines[0].startswith("HTTP/1.1 "), "status line %r" % lines[0])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        check(name.lower() not in headers, "duplicate header %r" % name)
        headers[name.lower()] = value.strip()
    for k, v in SECURITY.items():
        check(headers.get(k) == v, "%r: header %s = %r" % (lines[0], k, headers.get(k)))
    n = 0 if head_only else int(headers["content-length"])
    while len(buf) < n:
        chunk = s.recv(65536)
        check(chunk, "connection closed inside a body")
        buf += chunk
    return int(lines[0].split()[1]), headers, buf[:n], buf[n:]


def connect(srv):
    s = socket.create_connection(host_port(srv.address), timeout=10)
    return s


def closed(s):
    """True when the server closes the connection (EOF) with nothing more sent."""
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return False


def exchange(srv, data):
    """Sends data on a new connection; the one answer, and whether the server then closed."""
    s = connect(srv)
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and stopped reading; the answer must still arrive
    st, h, body, rest = read_response(s)
    check(rest == b"", "bytes after the answer: %r" % rest[:40])
    done = closed(s)
    s.close()
    return st, h, body, done


def protocol(srv):
    # -X FOO (a method llhttp does not know): 405, Allow, the five headers; curl as well.
    st, h, body, done = exchange(srv, b"FOO /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    check(st == 405 and h.get("allow") == "GET, HEAD" and done, "FOO: %d %r" % (st, h))
    if shutil.which("curl"):
        p = subprocess.run(["curl", "-s", "-i", "-X", "FOO", "http://%s/healthz" % srv.address],
                           stdout=subprocess.PIPE, text=True, timeout=30)
        head = p.stdout.split("\n\n")[0].lower()  # text mode: CRLF reads as LF
        check(p.stdout.startswith("HTTP/1.1 405 ") and "\nallow: get, head" in head and
              all("\n%s: %s" % (k, v.lower()) in head for k, v in SECURITY.items()),
              "curl -X FOO: %r" % p.stdout)

    # Malformed requests: 400 with the headers, and the connection closes.
    for bad in (b"GET /healthz HTTP/1.1 junk\r\nHost: localhost\r\n\r\n",
                b"GET  /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n",
                b"GET /healthz HTTP/2.0\r\nHost: localhost\r\n\r\n",
                b"GET /healthz\r\n\r\n",
                b"GET /healthz HTTP/1.1\nHost: localhost\r\n\r\n",
                b"GET /healthz HTTP/1.1\r\n Host: localhost\r\n\r\n",
                b"GET /health\x01z HTTP/1.1\r\nHost: localhost\r\n\r\n",
                b"GET /healthz HTTP/1.1\r\n\r\n",
                b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nHost: y\r\n\r\n",
                b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03\r\n\r\n"):
        st, h, body, done = exchange(srv, bad)
        check(st == 400 and h.get("connection") == "close" and done, "%r: %d" % (bad, st))

    # The head cap (VG_ADMIN_MAX_HEAD_BYTES = 8192): a head of exactly 8192 bytes is served, one
    # byte more is 431 with the headers - whole, or sent in pieces.
    def padded(size):
        pre = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nX-Pad: "
        return pre + b"a" * (size - len(pre) - 4) + b"\r\n\r\n"
    check(len(padded(8192)) == 8192, "padding")
    st, _, body, done = exchange(srv, padded(8192))
    check(st == 200 and body == b"ok\n" and done, "8192-byte head: %d" % st)
    st, h, _, done = exchange(srv, padded(8193))
    check(st == 431 and h.get("connection") == "close" and done, "8193-byte head: %d" % st)
    st, _, _, done = exchange(srv, padded(70000))
    check(st == 431 and done, "70000-byte head: %d" % st)
    s = connect(srv)
    data = padded(9000)
    for i in range(0, 8200, 1000):
        s.sendall(data[i:i + 1000])
        time.sleep(0.01)
    st, h, _, rest = read_response(s)
    check(st == 431 and rest == b"" and closed(s), "head over the cap in pieces: %d" % st)
    s.close()
    # 101 fields fit in 8 KiB but are over the parser's field cap: 431 as well.
    many = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n" + b"".join(b"A%d: 1\r\n" % i
                                                                   for i in range(101)) + b"\r\n"
    st, _, _, done = exchange(srv, many)
    check(st == 431 and done, "101 fields: %d" % st)

    # Keep-alive: two requests one after the other on one connection, then two pipelined.
    s = connect(srv)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    st, h, body, rest = read_response(s)
    check(st == 200 and body == b"ok\n" and "connection" not in h and rest == b"",
          "keep-alive first: %d %r" % (st, h))
    s.sendall(b"GET /v1/status?x=1 HTTP/1.1\r\nHost: localhost\r\n\r\n")
    st, h, body, rest = read_response(s)
    check(st == 200 and json.loads(body)["version"] == "test" and rest == b"",
          "keep-alive second: %d" % st)
    s.sendall(b"HEAD /ca.pem HTTP/1.1\r\nHost: localhost\r\n\r\n"
              b"GET /nope HTTP/1.1\r\nHost: localhost\r\n\r\n"
              b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
              b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    st, h, body, rest = read_response(s, head_only=True)
    check(st == 200 and int(h["content-length"]) > 0 and "connection" not in h,
          "pipelined HEAD: %d" % st)
    st, h, body, rest = read_response(s, rest)
    check(st == 404 and "connection" not in h, "pipelined 404: %d" % st)
    st, h, body, rest = read_response(s, rest)
    check(st == 200 and h.get("connection") == "close" and rest == b"" and closed(s),
          "Connection: close ends the connection, the request after it unanswered: %d" % st)
    s.close()
    # A 405 for a known method without a body keeps the connection.
    s = connect(srv)
    s.sendall(b"DELETE /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    st, h, _, rest = read_response(s)
    check(st == 405 and "connection" not in h, "DELETE: %d %r" % (st, h))
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    st, _, body, _ = read_response(s)
    check(st == 200 and body == b"ok\n", "GET after 405: %d" % st)
    s.close()

    # HTTP/1.0: answered, then closed, with or without keep-alive asked for.
    for req in (b"GET /healthz HTTP/1.0\r\n\r\n",
                b"GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"):
        st, h, body, done = exchange(srv, req)
        check(st == 200 and body == b"ok\n" and h.get("connection") == "close" and done,
              "%r: %d %r" % (req, st, h))

    # Admin requests have no body: GET with one is 400, POST with one 405; both close, and the
    # body is never taken for a request.
    st, _, _, done = exchange(srv, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5"
                              b"\r\n\r\nGET /x")
    check(st == 400 and done, "GET with a body: %d" % st)
    st, _, _, done = exchange(srv, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n")
    check(st == 400 and done, "GET with a chunked body: %d" % st)
    st, h, _, done = exchange(srv, b"POST /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: "
                              b"2000\r\n\r\n" + b"x" * 2000)
    check(st == 405 and h.get("allow") == "GET, HEAD" and done, "POST with a body: %d" % st)
    st, _, body, _ = exchange(srv, b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n"
                              b"Connection: close\r\n\r\n")
    check(st == 200 and body == b"ok\n", "Content-Length: 0 is no body: %d" % st)
    # Absolute-form targets route by their path too.
    st, _, body, _ = exchange(srv, b"GET http://localhost/healthz?y HTTP/1.1\r\nHost: localhost\r\n"
                              b"Connection: close\r\n\r\n")
    check(st == 200 and body == b"ok\n", "absolute-form: %d" % st)
    print("ok FOO/400/431 with the headers, keep-alive, pipelining, HTTP/1.0, bodies", flush=True)
    host_rule(srv)


def host_rule(srv):
    """SPEC §7, DNS rebinding: Host must be localhost or an IP literal (the admin address is
    one), with or without a port; anything else is 421 with the security headers, and closes.
    HTTP/1.0 without Host is served (no browser sends one)."""
    port = host_port(srv.address)[1]
    for host in (b"localhost", b"LocalHost", b"localhost:%d" % port, b"127.0.0.1",
                 b"127.0.0.1:%d" % port, b"[::1]", b"[::1]:%d" % port, b"10.1.2.3:80"):
        st, _, body, _ = exchange(srv, b"GET /healthz HTTP/1.1\r\nHost: " + host +
                                  b"\r\nConnection: close\r\n\r\n")
        check(st == 200 and body == b"ok\n", "Host %r: %d" % (host, st))
    for host in (b"localhost:", b"localhost:x", b"[::1", b"[::1]x", b"local host", b"[attacker]",
                 b"[fe80::1%25lo]", b"127.1", b"0x7f000001"):
        st, _, _, done = exchange(srv, b"GET /healthz HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
        check(st in (400, 421) and done, "malformed Host %r: %d" % (host, st))
    for host in (b"attacker.example", b"attacker.example:%d" % port, b"localhost.attacker.example",
                 b"127.0.0.1.nip.io", b"localhost."):
        for method in (b"GET", b"HEAD", b"POST"):
            s = connect(srv)
            s.sendall(method + b" /v1/status HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
            st, h, _, rest = read_response(s, head_only=method == b"HEAD")
            done = rest == b"" and closed(s)
            s.close()
            check(st == 421 and done, "%s with Host %r: %d, closed %s" % (method, host, st, done))
    st, _, _, done = exchange(srv, b"GET /healthz HTTP/1.0\r\nHost: attacker.example\r\n\r\n")
    check(st == 421 and done, "HTTP/1.0 with a foreign Host: %d" % st)
    st, _, body, done = exchange(srv, b"GET /healthz HTTP/1.0\r\n\r\n")
    check(st == 200 and body == b"ok\n", "HTTP/1.0 without Host: %d" % st)
    st, _, _, done = exchange(srv, b"GET http://attacker.example/healthz HTTP/1.1\r\n"
                              b"Host: localhost\r\n\r\n")
    check(st == 421 and done, "absolute-form naming a foreign host: %d" % st)
    if shutil.which("curl"):  # what a page rebinding attacker.example would make a browser send
        p = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--resolve",
                            "attacker.example:%d:127.0.0.1" % port,
                            "http://attacker.example:%d/v1/status" % port],
                           stdout=subprocess.PIPE, text=True, timeout=30)
        check(p.stdout == "421", "curl through a rebound name: %r" % p.stdout)
    print("ok Host rule: localhost and IP literals served, any other name 421", flush=True)


def main():
    for path in (SERVE, DRIVE):
        check(os.access(path, os.X_OK), "missing %s" % path)
    tmp = os.environ.get("VG_CASE_TMP")
    if not tmp:
        tmp = tempfile.mkdtemp(prefix="vg-admin-")
        atexit.register(shutil.rmtree, tmp, True)
    store = "sqlite:" + os.path.join(tmp, "audit.db")
    for run in ("r1", "r2"):
        p = subprocess.run([DRIVE, "--store", store, "--run", run, "--threads", "2", "--hosts",
                            "3", "--repeat", "1", "--route", "direct"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=60)
        check(p.returncode == 0, "audit_drive: %s" % p.stderr)

    srv = Server("127.0.0.1:0", "--audit", store, "--run", "r1", "--ready-file",
                 os.path.join(tmp, "ready"))
    endpoints(srv, tmp)
    protocol(srv)
    log = srv.stop()
    check("probe=1" not in log and "verbose" not in log, "query string in the log: %r" % log)

    # A store that cannot be read: 503 with a JSON error; the query string never logged.
    srv = Server("127.0.0.1:0", "--audit", "sqlite:" + os.path.join(tmp, "missing.db"))
    st, h, body = request(srv, "GET", "/v1/egress-routes?token=QUERYSECRET")
    check(st == 503 and json.loads(body).get("error"), "unreadable store: %d %r" % (st, body))
    log = srv.stop()
    check("QUERYSECRET" not in log, "query string in the log: %r" % log)
    check(not os.path.exists(os.path.join(tmp, "missing.db")), "reader created a store")

    # `off`: empty lists.
    srv = Server("[::1]:0") if socket.has_ipv6 and ipv6_loopback() else Server("127.0.0.1:0")
    st, _, body = request(srv, "GET", "/v1/blocked-hosts")
    check(st == 200 and json.loads(body) == [], "off store: %d %r" % (st, body))
    srv.stop()
    print("ok unreadable store (503), off store ([])", flush=True)

    conn_cap()
    unix_socket(tmp)
    usage_checks()
    return 0


def is_open(s):
    """True while the server keeps s open (nothing to read, no EOF)."""
    s.setblocking(False)
    try:
        return s.recv(1, socket.MSG_PEEK) != b""
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        s.setblocking(True)


def conn_cap():
    """VG_ADMIN_MAX_CONNS (64) open connections: past it the connection that has waited
    longest for a request head is closed to make room, so 70 idle connections never lock out
    /healthz; a connection whose answer is being written is kept while idle ones remain;
    stopping with connections open in every state is clean."""
    srv = Server("127.0.0.1:0")
    held = [connect(srv) for _ in range(64)]
    held[1].sendall(b"GET /heal")                       # a head in progress
    held[2].sendall(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n" * 100)  # answers not read
    held[2].settimeout(60)
    check(held[2].recv(1, socket.MSG_PEEK), "no answer on the busy connection")  # it is writing
    held[2].settimeout(10)
    held += [connect(srv) for _ in range(6)]            # 70: six made room
    extra = connect(srv)                                # the 71st asks for /healthz
    # an idle connection waits ADMIN_IDLE_S (30 s) for its head: an answer within 20 s came
    # from a connection closed to make room, not from one that timed out
    extra.settimeout(20)
    extra.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    try:
        st, _, body, _ = read_response(extra)
    except socket.timeout:
        fail("/healthz unanswered for 20 s behind 70 idle connections")
    check(st == 200 and body == b"ok\n", "/healthz behind 70 idle connections: %d" % st)
    closed_ones = [i for i, s in enumerate(held) if not is_open(s)]
    check(closed_ones == [0, 1, 3, 4, 5, 6, 7],
          "closed to make room: %r (want the seven that waited longest for a head)" %
          closed_ones)
    srv.stop()
    for s in held + [extra]:
        s.close()
    print("ok 70 idle connections: the oldest idle closed, /healthz answered at once; "
          "stop with connections open", flush=True)


def ipv6_loopback():
    try:
        s = socket.socket(socket.AF_INET6)
        s.bind(("::1", 0))
        s.close()
        return True
    except OSError:
        return False


def unix_socket(tmp):
    path = os.path.join(tmp, "admin.sock")
    srv = Server("unix:" + path)
    check(srv.address == "unix:" + path, "address %r" % srv.address)
    mode = os.stat(path).st_mode
    check(stat.S_ISSOCK(mode) and stat.S_IMODE(mode) == 0o660, "socket mode %o" % mode)
    if shutil.which("curl"):
        p = subprocess.run(["curl", "-s", "-i", "--unix-socket", path,
                            "http://localhost/healthz"], stdout=subprocess.PIPE, text=True,
                           timeout=30)
        check(p.returncode == 0 and p.stdout.startswith("HTTP/1.1 200") and
              p.stdout.endswith("\n\nok\n") and "X-Frame-Options: DENY" in p.stdout,
              "curl --unix-socket: %r" % p.stdout)
    out = raw(path, b"GET /readyz HTTP/1.0\r\n\r\n", socket.AF_UNIX)
    check(out.startswith(b"HTTP/1.1 200") or out.startswith(b"HTTP/1.0 200"), "unix GET %r" %
          out[:30])
    # On a unix socket any Host is served (SPEC §7: no web page can reach one): curl's
    # --unix-socket sends the URL's host, whatever it is.
    if shutil.which("curl"):
        for url in ("http://x/readyz", "http://admin.internal:9090/healthz"):
            p = subprocess.run(["curl", "-s", "-i", "--unix-socket", path, url],
                               stdout=subprocess.PIPE, text=True, timeout=30)
            check(p.returncode == 0 and p.stdout.startswith("HTTP/1.1 200"),
                  "curl --unix-socket %s: %r" % (url, p.stdout[:60]))
    for req in (b"GET /readyz HTTP/1.1\r\nHost: attacker.example\r\nConnection: close\r\n\r\n",
                b"GET http://attacker.example/readyz HTTP/1.1\r\nHost: attacker.example\r\n"
                b"Connection: close\r\n\r\n"):
        out = raw(path, req, socket.AF_UNIX)
        check(out.startswith(b"HTTP/1.1 200"), "unix socket, any Host: %r" % out[:30])
    # A second server on the same live socket must refuse, not steal it.
    p = subprocess.run([SERVE, "unix:" + path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    check(p.returncode == 4 and "listening" in p.stderr, "second bind: %d %r" %
          (p.returncode, p.stderr))
    srv.stop()
    check(not os.path.exists(path), "socket not removed on stop")
    # A stale socket file (nobody listening) is replaced.
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.close()
    srv = Server("unix:" + path)
    srv.stop()
    check(not os.path.exists(path), "stale socket left behind")
    # A regular file is never removed.
    open(path, "w").close()
    p = subprocess.run([SERVE, "unix:" + path], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True, timeout=30)
    check(p.returncode == 4 and os.path.isfile(path), "regular file: %d" % p.returncode)
    print("ok unix socket (0660, curl, removed on stop, stale replaced)", flush=True)


def usage_checks():
    cases = [
        (["127.0.0.1:9090"], 0), (["[::1]:9090"], 0), (["localhost:9090"], 0),
        (["unix:/run/vaultgate/admin.sock"], 0),
        (["0.0.0.0:9090"], 2), (["0.0.0.0:9090", "--allow-remote"], 0),
        (["192.0.2.10:9090"], 2), (["[::]:9090"], 2), (["[::]:9090", "--allow-remote"], 0),
        (["127.0.0.1"], 2), (["127.0.0.1:99999"], 2), (["::1:9090"], 2),
        (["example.com:9090", "--allow-remote"], 2), (["unix:relative"], 2),
    ]
    for args, want in cases:
        p = subprocess.run([SERVE, "--check"] + args, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True, timeout=30)
        check(p.returncode == want, "--check %r: exit %d (want %d) %s" %
              (args, p.returncode, want, p.stderr.strip()))
        if want:
            check(len(p.stderr.strip().splitlines()) == 1, "reason not one line: %r" % p.stderr)
    p = subprocess.run([SERVE, "--check", "0.0.0.0:9090"], stderr=subprocess.PIPE, text=True)
    check("--admin-allow-remote" in p.stderr, "reason does not name the option: %r" % p.stderr)
    # A port already taken: cannot bind, exit 4.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    p = subprocess.run([SERVE, "127.0.0.1:%d" % s.getsockname()[1]], stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=30)
    s.close()
    check(p.returncode == 4, "busy port: exit %d" % p.returncode)
    print("ok --admin usage checks and bind failure", flush=True)


if __name__ == "__main__":
    sys.exit(main())
