"""vgtest - helpers for vaultgate integration cases (python3 standard library only).

What it gives a case:
- Tmp: the case's temp dir (VG_CASE_TMP, or a fresh one).
- make_certs(): a test CA and upstream certificates generated at run time with the openssl CLI.
- FakeUpstream: a threaded TLS server on <random 127.x.y.z>:443 that records the exact bytes it
  receives per connection and answers scripted responses (plain, chunked, SSE with delays,
  large bodies, echo, close).
- Vaultgate: starts the binary (VG_BIN) with --resolve pins to the fake upstream, --upstream-ca,
  --state-dir in the temp dir, an HTTPS listener and the admin API on free loopback ports; waits
  for /readyz; stops it by PID; keeps stderr for canary checks.
- tls_client()/exchange(): a raw TLS client (python ssl trusting the run's ca.pem) that sends
  exact bytes; parse_response(); curl().

Network rule: loopback only, never a real name; pins only.
"""
import atexit
import hashlib
import http.client
import json
import os
import random
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time

SRC = os.environ.get("VG_SRC") or os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))))
VG_BIN = os.environ.get("VG_BIN") or os.path.join(SRC, "build", "cli", "vaultgate")

PASS, SKIP = 0, 77


def skip(reason):
    print("SKIP: " + reason, flush=True)
    sys.exit(SKIP)


_started = []


@atexit.register
def _kill_started():
    """A case that fails (sys.exit) must not leave a vaultgate behind: stop what is running."""
    for p in _started:
        if p.poll() is None:
            p.kill()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def log(msg):
    print(msg, flush=True)


def tmpdir():
    """The case's temp dir: VG_CASE_TMP, or one made (once) for this process."""
    d = os.environ.get("VG_CASE_TMP")
    if not d:
        d = tempfile.mkdtemp(prefix="vgtest-")
        os.environ["VG_CASE_TMP"] = d
    return d


_PORTS_GIVEN = set()
_PORT_LOCKS = []  # open files whose flock reserves a port for as long as this process lives
PORT_LOCK_DIR = "/tmp/vgtest-ports"


def _port_span():
    """The unprivileged ports the kernel never hands out by itself: below (or above) the range it
    picks ephemeral ports from, for bind(port 0) and for the source port of every connect on the
    machine. A port from there that is free now stays free until someone binds it by number."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999
    if lo - 20000 >= 2000:
        return 20000, lo - 1
    if 65535 - hi >= 2000:
        return hi + 1, 65535
    return None


def _reserve(port):
    """Takes the machine-wide reservation of port (an flock on a file named after it, held until
    this process exits), so that cases running at once, in this suite or another, never pick the
    same port. False when another live process holds it."""
    import fcntl
    try:
        os.makedirs(PORT_LOCK_DIR, mode=0o1777, exist_ok=True)
        fd = os.open(os.path.join(PORT_LOCK_DIR, str(port)), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return True  # nowhere to keep reservations: the bind check alone decides
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _PORT_LOCKS.append(fd)
    return True


def _bindable(host, port):
    """Nothing holds port now on any address of host's family, for TCP or UDP (the wildcard
    bind, without SO_REUSEADDR: a port with connections left in TIME_WAIT counts as taken)."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    for kind in (socket.SOCK_STREAM, socket.SOCK_DGRAM):
        s = socket.socket(fam, kind)
        try:
            s.bind(("::" if fam == socket.AF_INET6 else "0.0.0.0", port))
        except OSError:
            return False
        finally:
            s.close()
    return True


def free_port(host="127.0.0.1"):
    """A port for a server this case starts later (often another process): one the kernel never
    picks for others (outside the ephemeral range), free now for TCP and UDP, and reserved on
    the machine for this case, so that nothing takes it between this call and the server's bind:
    no other case, and no connect's source port. Never the same port twice in one case."""
    span = _port_span()
    for _ in range(200):
        if span is None:
            s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
            s.bind((host, 0))
            port = s.getsockname()[1]
            s.close()
        else:
            port = random.randint(span[0], span[1])
        if port in _PORTS_GIVEN or not _bindable(host, port) or not _reserve(port):
            continue
        _PORTS_GIVEN.add(port)
        return port
    fail("no free port on %s not given before" % host)


def free_loopback_addr(port=443, tries=50):
    """A random 127.x.y.z on which port is free to bind now (skips the case without the right to
    bind a low port; fails when none is found)."""
    for _ in range(tries):
        a = "127.%d.%d.%d" % (random.randint(1, 254), random.randint(0, 255),
                              random.randint(2, 254))
        s = socket.socket()
        try:
            s.bind((a, port))
            return a
        except PermissionError:
            skip("cannot bind port %d (needs root or CAP_NET_BIND_SERVICE)" % port)
        except OSError:
            continue
        finally:
            s.close()
    fail("no free loopback address for port %d" % port)


def require_binary():
    if not os.access(VG_BIN, os.X_OK):
        skip("no vaultgate binary at %s" % VG_BIN)


# ---- certificates ----------------------------------------------------------------------------

def _openssl(args, cwd):
    r = subprocess.run(["openssl"] + args, cwd=cwd, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    if r.returncode != 0:
        fail("openssl %s: %s" % (" ".join(args[:2]), r.stderr.decode(errors="replace")))


def make_ca(d, name="ca"):
    """A test CA (ECDSA P-256). Returns (cert_path, key_path)."""
    crt, key = os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")
    _openssl(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
              "-keyout", key, "-out", crt, "-days", "2", "-subj", "/CN=vgtest " + name,
              "-addext", "basicConstraints=critical,CA:TRUE",
              "-addext", "keyUsage=critical,keyCertSign,cRLSign",
              "-addext", "subjectKeyIdentifier=hash"], d)
    return crt, key


def make_leaf(d, ca, names, name="upstream"):
    """A server certificate for names (DNS names or IPs) signed by ca=(crt, key)."""
    crt, key, csr = (os.path.join(d, name + x) for x in (".pem", ".key", ".csr"))
    ext = os.path.join(d, name + ".ext")
    sans = ",".join(("IP:" if n.replace(".", "").isdigit() else "DNS:") + n for n in names)
    with open(ext, "w") as f:
        f.write("subjectAltName=%s\nbasicConstraints=critical,CA:FALSE\n"
                "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n" % sans)
    _openssl(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
              "-keyout", key, "-out", csr, "-subj", "/CN=" + names[0]], d)
    _openssl(["x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
              "-out", crt, "-days", "2", "-sha256", "-extfile", ext], d)
    return crt, key


def make_certs(d, names):
    """Test CA + one upstream leaf for names. Returns dict(ca=, cert=, key=)."""
    ca = make_ca(d)
    crt, key = make_leaf(d, ca, names)
    return {"ca": ca[0], "cert": crt, "key": key}


# ---- HTTP helpers ----------------------------------------------------------------------------

def parse_head(raw):
    """bytes of a head (without the final CRLFCRLF) -> (start line, [(name, value)])."""
    lines = raw.split(b"\r\n")
    fields = []
    for l in lines[1:]:
        n, _, v = l.partition(b":")
        fields.append((n.decode("latin-1"), v.strip().decode("latin-1")))
    return lines[0].decode("latin-1"), fields


def header(fields, name):
    vals = [v for n, v in fields if n.lower() == name.lower()]
    return vals


def _read_chunked(buf, pos, more):
    """De-chunks from buf[pos:]; more() returns additional bytes or b''. -> (body, end pos)."""
    body = b""
    while True:
        while b"\r\n" not in buf[pos:]:
            m = more()
            if not m:
                raise EOFError("chunk size line")
            buf += m
        i = buf.index(b"\r\n", pos)
        size = int(buf[pos:i].split(b";")[0], 16)
        pos = i + 2
        if size == 0:
            while b"\r\n" not in buf[pos:]:
                m = more()
                if not m:
                    raise EOFError("last chunk")
                buf += m
            # trailers: until an empty line
            while not buf[pos:].startswith(b"\r\n"):
                j = buf.find(b"\r\n", pos)
                while j < 0:
                    m = more()
                    if not m:
                        raise EOFError("trailer")
                    buf += m
                    j = buf.find(b"\r\n", pos)
                pos = j + 2
                while len(buf) < pos + 2:
                    m = more()
                    if not m:
                        raise EOFError("trailer end")
                    buf += m
            return body, buf, pos + 2
        while len(buf) < pos + size + 2:
            m = more()
            if not m:
                raise EOFError("chunk data")
            buf += m
        body += buf[pos:pos + size]
        pos += size + 2


class Response:
    def __init__(self, status, reason, fields, body, raw_head):
        self.status, self.reason, self.fields, self.body = status, reason, fields, body
        self.raw_head = raw_head

    def header(self, name):
        v = header(self.fields, name)
        return v[0] if v else None

    def __repr__(self):
        return "<Response %d %s %r>" % (self.status, self.fields, self.body[:200])


def parse_response(data, method="GET", reader=None):
    """Parses one response from data (bytes); reader() may supply more. -> (Response, rest)."""
    more = reader or (lambda: b"")
    buf = data
    while b"\r\n\r\n" not in buf:
        m = more()
        if not m:
            raise EOFError("response head: %r" % buf[:200])
        buf += m
    i = buf.index(b"\r\n\r\n")
    start, fields = parse_head(buf[:i])
    parts = start.split(" ", 2)
    status = int(parts[1])
    pos = i + 4
    te = header(fields, "transfer-encoding")
    cl = header(fields, "content-length")
    if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
        body = b""
    elif te and te[0].lower() == "chunked":
        body, buf, pos = _read_chunked(buf, pos, more)
    elif cl:
        n = int(cl[0])
        while len(buf) < pos + n:
            m = more()
            if not m:
                raise EOFError("body: %d of %d" % (len(buf) - pos, n))
            buf += m
        body = buf[pos:pos + n]
        pos += n
    else:
        while True:
            m = more()
            if not m:
                break
            buf += m
        body = buf[pos:]
        pos = len(buf)
    return Response(status, parts[2] if len(parts) > 2 else "", fields, body, buf[:i]), buf[pos:]


# ---- fake upstream ---------------------------------------------------------------------------

def resp_bytes(status=200, body=b"ok", headers=(), reason=None):
    reasons = {200: "OK", 201: "Created", 204: "No Content", 302: "Found", 404: "Not Found",
               500: "Internal Server Error"}
    h = "HTTP/1.1 %d %s\r\n" % (status, reason or reasons.get(status, "X"))
    has_len = any(n.lower() in ("content-length", "transfer-encoding") for n, _ in headers)
    for n, v in headers:
        h += "%s: %s\r\n" % (n, v)
    if not has_len and status not in (204, 304):
        h += "Content-Length: %d\r\n" % len(body)
    return h.encode() + b"\r\n" + body


class Request:
    """One request as the fake upstream received it."""

    def __init__(self, raw_head, method, target, version, fields, body, raw):
        self.raw_head, self.method, self.target, self.version = raw_head, method, target, version
        self.fields, self.body, self.raw = fields, body, raw

    def header(self, name):
        return header(self.fields, name)


def send_corked(s, pieces):
    """Sends each piece with its own sendall (its own TLS record on an SSL socket) while the
    socket is corked, so that the records leave in one TCP write and arrive together."""
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
    try:
        for p in pieces:
            s.sendall(p)
    finally:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 0)


class FakeUpstream:
    """TLS server on ADDR:443. handler(req, conn_index) returns a list of actions:
    bytes (sent), ("sleep", s), ("call", fn) (fn() returns: to hold a response until the case has
    seen an event), ("close",), ("corked", [bytes, ...]) (send_corked), ("ws_echo", n),
    ("raw_echo",). Records raw bytes per connection."""

    def __init__(self, cert, key, handler=None, port=443, addr=None, tls=True,
                 continue100=False):
        self.handler = handler or (lambda req, ci: [resp_bytes(200, b"ok")])
        self.continue100 = continue100  # answer Expect: 100-continue before reading a body
        self.lock = threading.Lock()
        self.raw = []        # bytes received, one bytearray per connection
        self.requests = []   # Request objects, in order
        self.accepts = 0
        self.errors = []
        self.ciphers = []    # the TLS suite of each connection, in order of handshake
        self.ctx = None
        if tls:
            self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            self.ctx.load_cert_chain(cert, key)
            self.ctx.set_alpn_protocols(["http/1.1"])
        self.sock = None
        for _ in range(50):
            a = addr or "127.%d.%d.%d" % (random.randint(1, 254), random.randint(0, 255),
                                          random.randint(2, 254))
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((a, port))
            except PermissionError:
                s.close()
                skip("cannot bind port %d (needs root or CAP_NET_BIND_SERVICE)" % port)
            except OSError:
                s.close()
                if addr:
                    raise
                continue
            self.sock, self.addr, self.port = s, a, port
            break
        if self.sock is None:
            fail("no free loopback address for the fake upstream")
        self.sock.listen(1024)
        self.stopped = False
        self.thread = threading.Thread(target=self._accept_loop, daemon=True)
        self.thread.start()

    def pin(self, host):
        return "%s:%d:%s" % (host, self.port, self.addr)

    def stop(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass

    def _accept_loop(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                idx = self.accepts
                self.accepts += 1
                self.raw.append(bytearray())
            threading.Thread(target=self._serve, args=(c, idx), daemon=True).start()

    def _serve(self, c, idx):
        try:
            c.settimeout(30)
            s = self.ctx.wrap_socket(c, server_side=True) if self.ctx else c
            if self.ctx:
                with self.lock:
                    self.ciphers.append(s.cipher()[0])
        except (OSError, ssl.SSLError) as e:
            self.errors.append("handshake: %s" % e)
            c.close()
            return
        buf = b""

        def more():
            try:
                d = s.recv(65536)
            except (OSError, ssl.SSLError):
                return b""
            if d:
                with self.lock:
                    self.raw[idx].extend(d)
            return d

        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    d = more()
                    if not d:
                        return
                    buf += d
                i = buf.index(b"\r\n\r\n")
                raw_head = buf[:i + 4]
                start, fields = parse_head(buf[:i])
                method, target, version = start.split(" ")
                pos = i + 4
                te = header(fields, "transfer-encoding")
                cl = header(fields, "content-length")
                if self.continue100 and [v for v in header(fields, "expect")
                                         if v.lower() == "100-continue"]:
                    s.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")
                if te:
                    body, buf, pos = _read_chunked(buf, pos, more)
                elif cl:
                    n = int(cl[0])
                    parts, have = [buf], len(buf)
                    while have < pos + n:  # joined once: large bodies stay linear
                        d = more()
                        if not d:
                            return
                        parts.append(d)
                        have += len(d)
                    buf = b"".join(parts)
                    body = buf[pos:pos + n]
                    pos += n
                else:
                    body = b""
                req = Request(raw_head, method, target, version, fields, body, buf[:pos])
                buf = buf[pos:]
                with self.lock:
                    self.requests.append(req)
                for a in self.handler(req, idx):
                    if isinstance(a, (bytes, bytearray)):
                        s.sendall(a)
                    elif a[0] == "sleep":
                        time.sleep(a[1])
                    elif a[0] == "call":
                        a[1]()
                    elif a[0] == "close":
                        return
                    elif a[0] == "corked":
                        # each piece its own TLS record, all of them in one TCP write
                        send_corked(s, a[1])
                    elif a[0] == "ws_echo":
                        # after a 101: read client frames, send each message back in server
                        # frames of at most a[1] payload bytes, until EOF or a close frame
                        reader = WsReader(lambda: more(), buf)
                        while True:
                            msg = reader.message()
                            if msg is None:
                                return
                            op, payload = msg
                            s.sendall(ws_frames(payload, op, a[1]))
                            if op == 8:
                                return
                    elif a[0] == "raw_echo":
                        # after a 101: send back every byte that arrives, until EOF
                        if buf:
                            s.sendall(buf)
                        while True:
                            d = more()
                            if not d:
                                return
                            s.sendall(d)
        except (OSError, ssl.SSLError, ValueError, EOFError) as e:
            self.errors.append("serve: %s" % e)
        finally:
            try:
                s.close()
            except OSError:
                pass

    def all_bytes(self):
        with self.lock:
            return b"".join(bytes(r) for r in self.raw)


# ---- WebSocket frames (RFC 6455 §5.2) --------------------------------------------------------

def ws_frame(payload, op=1, fin=True, mask_key=None, rsv=0, length_field=None):
    """One frame. mask_key (4 bytes) masks it as a client must; rsv sets RSV bits (0x70 mask);
    length_field forces a 16-bit (126) or 64-bit (127) length encoding."""
    b0 = (0x80 if fin else 0) | rsv | op
    n = len(payload)
    mbit = 0x80 if mask_key is not None else 0
    if length_field == 127 or (length_field is None and n > 0xffff):
        head = bytes([b0, mbit | 127]) + n.to_bytes(8, "big")
    elif length_field == 126 or (length_field is None and n >= 126):
        head = bytes([b0, mbit | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([b0, mbit | n])
    if mask_key is None:
        return head + payload
    return head + mask_key + bytes(c ^ mask_key[i % 4] for i, c in enumerate(payload))


def ws_frames(payload, op=1, frag=None):
    """A message as server frames of at most frag payload bytes each (one frame when None)."""
    if op >= 8 or not frag or len(payload) <= frag:
        return ws_frame(payload, op)
    out = b""
    for i in range(0, len(payload), frag):
        last = i + frag >= len(payload)
        out += ws_frame(payload[i:i + frag], op if i == 0 else 0, fin=last)
    return out


class WsReader:
    """Reads frames from more() (returns bytes, b'' at EOF), starting with buffered bytes."""

    def __init__(self, more, buf=b""):
        self.more, self.buf = more, bytes(buf)

    def _need(self, n):
        while len(self.buf) < n:
            d = self.more()
            if not d:
                return False
            self.buf += d
        return True

    def frame(self):
        """-> (fin, rsv, op, masked, payload, raw bytes) or None at EOF."""
        if not self._need(2):
            return None
        b0, b1 = self.buf[0], self.buf[1]
        n, pos = b1 & 0x7f, 2
        if n == 126:
            if not self._need(4):
                return None
            n, pos = int.from_bytes(self.buf[2:4], "big"), 4
        elif n == 127:
            if not self._need(10):
                return None
            n, pos = int.from_bytes(self.buf[2:10], "big"), 10
        key = None
        if b1 & 0x80:
            if not self._need(pos + 4):
                return None
            key, pos = self.buf[pos:pos + 4], pos + 4
        if not self._need(pos + n):
            return None
        payload = self.buf[pos:pos + n]
        if key:
            payload = bytes(c ^ key[i % 4] for i, c in enumerate(payload))
        raw, self.buf = self.buf[:pos + n], self.buf[pos + n:]
        return bool(b0 & 0x80), b0 & 0x70, b0 & 0x0f, key is not None, payload, raw

    def message(self):
        """-> (opcode, payload) of the next whole message or control frame, or None at EOF."""
        op, data = None, b""
        while True:
            f = self.frame()
            if f is None:
                return None
            fin, _, fop, _, payload, _ = f
            if fop >= 8:
                return fop, payload
            op = fop if op is None else op
            data += payload
            if fin:
                return op, data


def ws_upgrade_request(host, extra=b""):
    return (b"GET /ws HTTP/1.1\r\nHost: " + host.encode() + b"\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\n" + extra + b"\r\n")


WS_101 = (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          b"Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")


def echo_handler(req, ci):
    """Answers with the exact request head and body it received."""
    return [resp_bytes(200, req.raw_head + req.body, [("Content-Type", "text/plain")])]


# ---- vaultgate -------------------------------------------------------------------------------

def example_vault(run_id="run-test", default="allow", secrets=None, rules=None, hosts=None):
    return {
        "version": 1,
        "run": {"id": run_id, "user": "u-test"},
        "secrets": secrets if secrets is not None else {
            "API_KEY": {"value": "sk-canary-SECRET-api-0001"}},
        "rules": rules if rules is not None else [
            {"host_pattern": "api.example.test", "secret": "API_KEY", "scheme": "bearer"}],
        "host_policy": {"default": default, "hosts": hosts if hosts is not None else {
            "blocked.example.test": "block"}},
    }


class Vaultgate:
    def __init__(self, d, vault, pins=(), upstream_ca=None, threads=1, audit="off",
                 extra=(), log_level=os.environ.get("VG_LOG_LEVEL", "info"), https_port=None,
                 http=False, proxy=False):
        self.d = d
        self.vault_path = os.path.join(d, "vault.json")
        if isinstance(vault, (dict, list)):
            with open(self.vault_path, "w") as f:
                json.dump(vault, f)
        else:
            self.vault_path = vault
        self.state = os.path.join(d, "var")
        self.ca = os.path.join(self.state, "ca.pem")
        self.port = https_port or free_port()
        self.admin_port = free_port()
        self.http_port = free_port() if http else None
        self.proxy_port = free_port() if proxy else None
        self.stderr_path = os.path.join(d, "vaultgate.stderr")
        if audit == "sqlite":
            audit = "sqlite:" + os.path.join(self.state, "audit.db")
        self.args = [VG_BIN, "run", "--vault", self.vault_path, "--state-dir", self.state,
                     "--listen-https", "127.0.0.1:%d" % self.port, "--listen-http",
                     "127.0.0.1:%d" % self.http_port if http else "none",
                     "--admin", "127.0.0.1:%d" % self.admin_port, "--audit", audit,
                     "--threads", str(threads), "--log-level", log_level]
        if proxy:
            self.args += ["--listen-proxy", "127.0.0.1:%d" % self.proxy_port]
        for p in pins:
            self.args += ["--resolve", p]
        if upstream_ca:
            self.args += ["--upstream-ca", upstream_ca]
        self.args += list(extra)
        self.proc = None

    def start(self, wait=True):
        self.errf = open(self.stderr_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=self.errf)
        _started.append(self.proc)
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout=60):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                fail("vaultgate exited %d at start:\n%s" % (self.proc.returncode, self.stderr()))
            try:
                st, _ = self.admin_get("/readyz")
                if st == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        fail("vaultgate not ready after %ds:\n%s" % (timeout, self.stderr()))

    def admin_get(self, path, timeout=30):
        c = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=timeout)
        try:
            c.request("GET", path)
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def status(self):
        st, body = self.admin_get("/v1/status")
        check(st == 200, "/v1/status answered %d" % st)
        return json.loads(body)

    def stop(self, sig=signal.SIGTERM, timeout=20):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            fail("vaultgate did not stop within %ds after signal %d" % (timeout, sig))
        self.check_sanitizers()
        return self.proc.returncode

    def check_sanitizers(self):
        """Fails the case when an ASan/UBSan/LSan build of vaultgate reported anything."""
        err = self.stderr()
        for word in ("AddressSanitizer", "LeakSanitizer", "runtime error:",
                     "UndefinedBehaviorSanitizer"):
            if word in err:
                i = err.index(word)
                fail("sanitizer report in vaultgate's stderr:\n" + err[max(0, i - 200):i + 3000])

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stderr(self):
        try:
            with open(self.stderr_path, "rb") as f:
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def events(self, name=None):
        out = []
        for line in self.stderr().splitlines():
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            if name is None or ev.get("event") == name:
                out.append(ev)
        return out

    # -- clients --

    def client_ctx(self):
        ctx = ssl.create_default_context(cafile=self.ca)
        ctx.set_alpn_protocols(["http/1.1"])
        return ctx

    def tls_client(self, sni, timeout=10, verify=True):
        """A TLS connection to the HTTPS listener with SNI sni (None: no SNI)."""
        ctx = self.client_ctx()
        if sni is None or not verify:
            ctx.check_hostname = False
        if not verify:
            ctx.verify_mode = ssl.CERT_NONE
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=timeout)
        return ctx.wrap_socket(raw, server_hostname=sni)

    def exchange(self, sni, data, timeout=10, verify=True):
        """Sends exact bytes, reads until EOF (or timeout). Returns the bytes received."""
        s = self.tls_client(sni, timeout, verify)
        try:
            s.sendall(data)
            return read_until_close(s)
        finally:
            s.close()

    def http_exchange(self, data, timeout=10):
        """Plain-HTTP listener: sends exact bytes, reads until EOF (or timeout)."""
        s = socket.create_connection(("127.0.0.1", self.http_port), timeout=timeout)
        try:
            s.sendall(data)
            return read_until_close(s)
        finally:
            s.close()

    def request(self, sni, data, method="GET", timeout=10, verify=True):
        """Sends one request (exact bytes) and parses one response; keeps nothing open."""
        out = self.exchange(sni, data, timeout, verify)
        if not out:
            fail("no response to %r" % data[:80])
        return parse_response(out, method)[0]

    def curl(self, host, path, extra=(), timeout=30):
        args = ["curl", "-sS", "--max-time", str(timeout), "--resolve",
                "%s:%d:127.0.0.1" % (host, self.port), "--cacert", self.ca,
                "https://%s:%d%s" % (host, self.port, path)] + list(extra)
        return subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def setup(names=("api.example.test",), vault=None, handler=None, start=True, **kw):
    """The common case: certs, a fake upstream for names, vaultgate pinned to it."""
    require_binary()
    d = tmpdir()
    certs = make_certs(d, list(names))
    up = FakeUpstream(certs["cert"], certs["key"], handler)
    vg = Vaultgate(d, vault or example_vault(), pins=[up.pin(n) for n in names],
                   upstream_ca=certs["ca"], **kw)
    if start:
        vg.start()
    return d, certs, up, vg


def sha256(b):
    return hashlib.sha256(b).hexdigest()


# ---- additions: network isolation, DNS-resolved runs, audit and metrics readers -------------

def isolate_net():
    """Re-executes the calling case (same PID, via exec) inside a fresh network namespace that
    holds only loopback, so that even a vaultgate that wrongly dialled a non-loopback address
    could reach nothing: such a connect fails with ENETUNREACH. Returns True once isolated,
    False (after printing why) when namespaces are unavailable here (not root, no unshare)."""
    import shutil
    if os.environ.get("VG_NETNS_ISOLATED") == "1":
        return True
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        log("note: no network namespace (needs root, unshare and ip); running unisolated")
        return False
    probe = subprocess.run(["unshare", "--net", "--", "ip", "link", "set", "lo", "up"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if probe.returncode != 0:
        log("note: unshare --net failed (%s); running unisolated" %
            probe.stderr.decode(errors="replace").strip())
        return False
    env = dict(os.environ, VG_NETNS_ISOLATED="1")
    sys.stdout.flush()
    os.execvpe("unshare", ["unshare", "--net", "--", "sh", "-c",
                           'ip link set lo up && exec "$0" "$@"', sys.executable,
                           os.path.abspath(sys.argv[0])] + sys.argv[1:], env)


class Witness:
    """A TCP listener on addr:port that accepts, counts and at once closes connections: a
    witness that nothing was dialled there (.accepts)."""

    def __init__(self, addr, port=443):
        self.addr, self.port, self.accepts = addr, port, 0
        self.sock = socket.socket(socket.AF_INET6 if ":" in addr else socket.AF_INET,
                                  socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((addr, port))
        except PermissionError:
            self.sock.close()
            skip("cannot bind port %d (needs root or CAP_NET_BIND_SERVICE)" % port)
        self.sock.listen(64)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.accepts += 1
            c.close()

    def stop(self):
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def wait_for(pred, timeout=30.0, step=0.05):
    """Polls pred() until it is true or timeout passes. Returns the last value."""
    deadline = time.monotonic() + timeout
    v = pred()
    while not v and time.monotonic() < deadline:
        time.sleep(step)
        v = pred()
    return v


def metrics_text(vg):
    st, body = vg.admin_get("/metrics")
    check(st == 200, "/metrics answered %d" % st)
    return body.decode("utf-8", "replace")


def metric_value(text, name_and_labels):
    """The value of one sample line (`name{labels}` exactly as printed), or None."""
    for line in text.splitlines():
        if line.startswith(name_and_labels + " "):
            return float(line[len(name_and_labels) + 1:].split()[0])
    return None


def audit_rows(vg, table, run_id="run-test"):
    """Rows of `vaultgate audit --store sqlite:<state>/audit.db <table> --run ID --json`
    (table blocked or routes). Stop vaultgate first so that every count was flushed."""
    store = "sqlite:" + os.path.join(vg.state, "audit.db")
    p = subprocess.run([VG_BIN, "audit", "--store", store, table, "--run", run_id, "--json"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    check(p.returncode == 0, "vaultgate audit %s: exit %d: %s" %
          (table, p.returncode, p.stderr.decode(errors="replace")))
    rows = json.loads(p.stdout)
    check(isinstance(rows, list), "vaultgate audit %s --json: not an array" % table)
    return rows


def read_until_close(s):
    """Reads from socket s until EOF, timeout or reset. Returns the bytes."""
    out = bytearray()
    while True:
        try:
            d = s.recv(65536)
        except (socket.timeout, ssl.SSLError, ConnectionResetError, OSError):
            break
        if not d:
            break
        out += d
    return bytes(out)


class ConnectProxy:
    """An HTTP CONNECT proxy on 127.0.0.1 (for --upstream-proxy): CONNECT host:port goes to
    targets[host] (a dict), or to targets itself when it is one (addr, port) pair; records the
    CONNECT lines it is sent (.lines)."""

    def __init__(self, targets):
        self.targets, self.lines = targets, []
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._loop, daemon=True).start()

    def url(self):
        return "http://127.0.0.1:%d" % self.port

    def _loop(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        head = b""
        while b"\r\n\r\n" not in head:
            b = c.recv(4096)
            if not b:
                c.close()
                return
            head += b
        line = head.split(b"\r\n", 1)[0].decode()
        self.lines.append(line)
        host = line.split()[1].rsplit(":", 1)[0]
        target = self.targets.get(host) if isinstance(self.targets, dict) else self.targets
        u = socket.create_connection(target)
        c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")

        def pump(a, b):
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    b.sendall(data)
            except OSError:
                pass
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        threading.Thread(target=pump, args=(c, u), daemon=True).start()
        pump(u, c)


def check_absent(texts, canaries):
    """Fails when any canary (a secret, token or signature) appears in any of texts, a dict of
    where -> str; the message names where, never the canary."""
    for where, text in texts.items():
        for c in canaries:
            check(c not in text, "%s carries a secret, token or signature" % where)
