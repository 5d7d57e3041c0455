#!/usr/bin/env python3
"""A real HTTP/2 server behind vaultgate (SPEC §10 "Upstream"): Debian's nghttpd (nghttp2-server)
serves a docroot over TLS with a certificate made at test time, limited to five concurrent
streams (-m 5), sending no content-length and a trailer on every answer, echoing uploads.
curl --http2 and curl --http1.1 reach it through vaultgate and get the files byte for byte (a
small page and 3 MiB of random bytes), an upload of 1 MiB echoed whole through both flow-control
directions, and the trailer (an h2 trailer, or after the last chunk for HTTP/1.1); twenty
concurrent streams (nghttp -m 20) all complete without nghttpd refusing one. nghttpd's own frame
log (-v) proves the upstream side: every connection negotiated h2 after vaultgate offered
h2,http/1.1; every request arrived as an h2 header block with :authority and no Host or other
connection-specific field, and the bearer secret in a never-indexed (sensitive) field; the
sequential requests shared one connection. Loopback only, the name pinned with --resolve.

Why this can fail: a hand-made translation that a python test server tolerates can still be
refused by nghttp2's own checks on the server side (a connection-specific field, an uppercase
name, a content-length that disagrees with the DATA); flow control that is wrong in either
direction stalls a body larger than a window; a stream limit overrun shows as REFUSED_STREAM."""
import hashlib
import os
import random
import re
import shutil
import socket
import subprocess

import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"
NGHTTPD = shutil.which("nghttpd") or ("/usr/sbin/nghttpd" if os.path.exists("/usr/sbin/nghttpd")
                                      else None)
if NGHTTPD is None or not shutil.which("nghttp"):
    t.skip("nghttpd or nghttp missing (Debian nghttp2-server, nghttp2-client; scripts/deps)")
t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
doc = os.path.join(d, "htdocs")
os.mkdir(doc)
PAGE = b"<!doctype html><title>vaultgate</title><p>served by nghttpd\n"
BLOB = random.Random(1309).randbytes(3 * 1024 * 1024)
UPLOAD = random.Random(1310).randbytes(1024 * 1024)
with open(os.path.join(doc, "index.html"), "wb") as f:
    f.write(PAGE)
with open(os.path.join(doc, "blob.bin"), "wb") as f:
    f.write(BLOB)
with open(os.path.join(d, "upload.bin"), "wb") as f:
    f.write(UPLOAD)

addr = t.free_loopback_addr(443)
ngd_log = open(os.path.join(d, "nghttpd.out"), "wb")
ngd = subprocess.Popen([NGHTTPD, "-a", addr, "-d", doc, "-v", "-m", "5", "--no-content-length",
                        "--trailer", "x-served-by: nghttpd", "--echo-upload", "443",
                        certs["key"], certs["cert"]], stdout=ngd_log, stderr=subprocess.STDOUT)


def listening():
    try:
        socket.create_connection((addr, 443), timeout=1).close()
        return True
    except OSError:
        return False


if not t.wait_for(listening, timeout=10):
    ngd.kill()
    t.fail("nghttpd did not listen on %s:443" % addr)
vg = t.Vaultgate(d, t.example_vault(), upstream_ca=certs["ca"],
                 pins=["api.example.test:443:" + addr]).start()


def curl(proto, path, *extra):
    p = subprocess.run(["curl", "-sS", "-v", proto, "--max-time", "30", "--resolve",
                        "api.example.test:%d:127.0.0.1" % vg.port, "--cacert", vg.ca,
                        "-H", "Authorization: Bearer placeholder",
                        "https://api.example.test:%d%s" % (vg.port, path)] + list(extra),
                       capture_output=True, timeout=60)
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


nreq = 0
try:
    for proto, status in (("--http2", "< HTTP/2 200"), ("--http1.1", "< HTTP/1.1 200")):
        rc, out, err = curl(proto, "/index.html")
        t.check(rc == 0 and status in err and out == PAGE, "%s page: rc %d %r\n%s" %
                (proto, rc, out[:100], err[-600:]))
        t.check("< x-served-by: nghttpd" in err or proto == "--http1.1",
                "%s: no trailer\n%s" % (proto, err[-600:]))
        rc, out, err = curl(proto, "/blob.bin")
        t.check(rc == 0 and status in err and hashlib.sha256(out).digest() ==
                hashlib.sha256(BLOB).digest(), "%s blob: rc %d, %d bytes\n%s" %
                (proto, rc, len(out), err[-400:]))
        rc, out, err = curl(proto, "/echo", "--data-binary", "@" + os.path.join(d, "upload.bin"),
                            "-H", "Content-Type: application/octet-stream")
        t.check(rc == 0 and status in err and out == UPLOAD, "%s upload echo: rc %d, %d bytes\n%s"
                % (proto, rc, len(out), err[-400:]))
        nreq += 3
    # HTTP/1.1: the trailer after the last chunk
    raw = vg.exchange("api.example.test", b"GET /index.html HTTP/1.1\r\nHost: api.example.test"
                      b"\r\nConnection: close\r\n\r\n")
    head, _, body = raw.partition(b"\r\n\r\n")
    t.check(head.startswith(b"HTTP/1.1 200") and b"Transfer-Encoding: chunked" in head and
            body.endswith(b"\r\n0\r\nx-served-by: nghttpd\r\n\r\n") and PAGE in body,
            "HTTP/1.1 chunked trailer: %r" % raw[-300:])
    nreq += 1
    # twenty streams at once against a limit of five
    p = subprocess.run(["nghttp", "-n", "-s", "-m", "20", "-H", ":authority: api.example.test",
                        "--no-verify-peer", "https://127.0.0.1:%d/index.html" % vg.port],
                       capture_output=True, timeout=60)
    stats = p.stdout.decode(errors="replace")
    codes = [ln.split()[4] for ln in stats.splitlines() if ln.rstrip().endswith("/index.html")]
    t.check(p.returncode == 0 and codes == ["200"] * 20, "nghttp -m 20: %r %s" %
            (codes, p.stderr[-300:]))
    nreq += 20
finally:
    vg.stop()
    ngd.terminate()
    try:
        ngd.wait(10)
    except subprocess.TimeoutExpired:
        ngd.kill()
    ngd_log.close()

with open(os.path.join(d, "nghttpd.out"), "rb") as f:
    ng = f.read().decode(errors="replace")
offers = re.findall(r"\[ALPN\] client offers:\n((?: \* .*\n)+)", ng)
t.check(offers and all(o == " * h2\n * http/1.1\n" for o in offers),
        "ALPN offers seen by nghttpd: %r" % offers[:4])
t.check(ng.count("The negotiated protocol: h2") >= 1 and "did not advertise" not in ng,
        "not h2: %s" % ng[:500])
sessions = set(re.findall(r"^\[id=(\d+)\]", ng, re.M))
# the twelve sequential requests on one connection, the burst of twenty on at most four more
first = re.findall(r"^\[id=(\d+)\] .*recv \(stream_id=\d+(?:, sensitive)?\) :path: ", ng, re.M)
t.check(len(set(first[:nreq - 20])) == 1, "sequential requests spread over sessions %r" %
        sorted(set(first[:nreq - 20])))
t.check(len(sessions) <= 5, "%d upstream sessions" % len(sessions))
fields = re.findall(r"recv \(stream_id=\d+(, sensitive)?\) ([^:\s][^:]*|:[a-z]+): (.*)", ng)
names = [n for _, n, _ in fields]
auth = [(sens, v) for sens, n, v in fields if n == "authorization"]
t.check(len(auth) == nreq and all(a == (", sensitive", "Bearer " + SECRET) for a in auth),
        "authorization fields at nghttpd: %d of %d, %r" % (len(auth), nreq, auth[:2]))
t.check(names.count(":authority") == nreq and
        all(v == "api.example.test" for _, n, v in fields if n == ":authority"),
        ":authority %r" % [v for _, n, v in fields if n == ":authority"][:3])
bad = {"host", "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade",
       "te"} & set(names)
t.check(not bad, "connection-specific fields reached nghttpd: %r" % bad)
t.check(all(n == n.lower() for n in names), "upper-case field names: %r" % names)
t.check("REFUSED_STREAM" not in ng and "PROTOCOL_ERROR" not in ng,
        "nghttpd refused or reset: %s" % ng[ng.find("RST_STREAM") - 300:][:800])
log = vg.stderr()
t.check(SECRET not in log, "secret in vaultgate's log")
reqs = [e for e in vg.events("request") if e.get("status") == 200]
t.check(len(reqs) == nreq and {e.get("proto") for e in reqs} == {"h2", "http/1.1"},
        "request lines %d of %d" % (len(reqs), nreq))
