#!/usr/bin/env python3
"""HTTP/2 upstream pooling (SPEC §10): requests to one host share one upstream connection as
streams. Twenty concurrent streams from one h2 client (nghttp -m 20), then twenty HTTP/1.1
clients at once (curl --http1.1), reach an h2 upstream over ONE TCP connection carrying all
forty streams, twenty of them open at the same time. An upstream that allows only five
concurrent streams (SETTINGS_MAX_CONCURRENT_STREAMS 5, enforced by python-h2 from its first
frame on) never sees a sixth open stream on any connection - not even in the moment before its
SETTINGS reach vaultgate - and every one of twenty concurrent requests from either kind of
client still completes, spread over as few connections as the limit allows. When the request
whose dial the others wait for goes away before the (slow) handshake ends, the waiting
requests dial again and complete, together on one new connection.

Why this can fail: a proxy that dials for each request while the first connection is still
being made opens twenty connections for a burst of twenty requests (vaultgate did, before
requests learned to wait for the connection being dialled); one that assumes the default of 100
streams until the server's SETTINGS arrive overruns a server that allows five, which kills the
connection and every request on it; requests queued on a dial nobody completes hang."""
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import h2server  # noqa: E402

h2server.need_h2()
import h2raw  # noqa: E402
import vgtest as t  # noqa: E402
from h2server import H2Answer, H2Upstream  # noqa: E402

SECRET = "sk-canary-SECRET-api-0001"


def handler(r):
    # slow enough that every request of a burst is open at the upstream at once
    return H2Answer(200, [("content-type", "text/plain")],
                    [("sleep", 0.4), ("conn=%d %s" % (r.conn, r.header(":path")[0])).encode()])


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test", "five.example.test", "slow.example.test"])
up = H2Upstream(certs["cert"], certs["key"], handler)
five = H2Upstream(certs["cert"], certs["key"], handler, max_streams=5)
slow = H2Upstream(certs["cert"], certs["key"], handler, handshake_delay=0.7)
vault = t.example_vault(hosts={"five.example.test": "allow", "slow.example.test": "allow"})
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"],
                 pins=[up.pin("api.example.test"), five.pin("five.example.test"),
                       slow.pin("slow.example.test")]).start()


def nghttp_burst(host, n=20):
    """n concurrent streams on one h2 client connection; -> the status of each."""
    p = subprocess.run(["nghttp", "-n", "-s", "-m", str(n), "-H", ":authority: " + host,
                        "--no-verify-peer", "https://127.0.0.1:%d/burst" % vg.port],
                       capture_output=True, timeout=60)
    stats = p.stdout.decode(errors="replace")
    t.check(p.returncode == 0, "nghttp: rc %d %s %s" % (p.returncode, stats[-400:],
                                                       p.stderr[-400:]))
    return [line.split()[4] for line in stats.splitlines() if line.rstrip().endswith("/burst")]


def curl_burst(host, n=20):
    """n HTTP/1.1 clients at once, each on its own connection; -> (status, body) of each."""
    procs = [subprocess.Popen(["curl", "-sS", "--http1.1", "--max-time", "30", "-w", "\n%{http_code}",
                               "--resolve", "%s:%d:127.0.0.1" % (host, vg.port), "--cacert", vg.ca,
                               "https://%s:%d/h1-%d" % (host, vg.port, i)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for i in range(n)]
    out = []
    for p in procs:
        o, e = p.communicate(timeout=60)
        body, _, code = o.rpartition(b"\n")
        out.append((code.decode(), body, e))
    return out


try:
    # one h2 client, twenty streams at once
    st = nghttp_burst("api.example.test")
    t.check(st == ["200"] * 20, "nghttp statuses %r" % st)
    t.check(up.accepts == 1, "twenty concurrent streams made %d upstream connections: %r" %
            (up.accepts, [(c.streams, c.peak) for c in up.conns]))
    t.check(up.conns[0].streams == 20 and up.conns[0].peak == 20,
            "streams %d, at most %d at once" % (up.conns[0].streams, up.conns[0].peak))
    # twenty HTTP/1.1 clients at once: the same pooled connection
    res = curl_burst("api.example.test")
    for i, (code, body, err) in enumerate(res):
        t.check(code == "200" and body == b"conn=0 /h1-%d" % i, "curl %d: %s %r %r" %
                (i, code, body, err))
    t.check(up.accepts == 1 and up.conns[0].streams == 40,
            "HTTP/1.1 clients: %d connections, %r" % (up.accepts,
                                                      [(c.streams, c.peak) for c in up.conns]))
    t.check(all(r.header("authorization") == ["Bearer " + SECRET] for r in up.requests),
            "a request on the shared connection went without its credential")
    # a server that allows five streams at once
    st = nghttp_burst("five.example.test")
    t.check(st == ["200"] * 20, "limit 5, nghttp statuses %r; upstream %r %r" %
            (st, five.errors, [(c.streams, c.peak) for c in five.conns]))
    res = curl_burst("five.example.test")
    t.check([c for c, _, _ in res] == ["200"] * 20, "limit 5, curl %r" % res)
    conns = [(c.streams, c.peak) for c in five.conns]
    t.check(not five.errors, "the limit of five was overrun: %r %r" % (five.errors, conns))
    t.check(all(peak <= 5 for _, peak in conns), "more than five streams open: %r" % conns)
    t.check(sum(s for s, _ in conns) == 40, "streams per connection %r" % (conns,))
    t.check(max(peak for _, peak in conns) == 5 and five.accepts <= 12,
            "connections not shared up to the limit: %r" % (conns,))
    t.check(not up.errors, "upstream errors %r" % up.errors)
    # the request that dials goes away while the others wait for its connection
    c = h2raw.Conn(vg.port, vg.ca, sni="slow.example.test")
    hdrs = [(":method", "GET"), (":scheme", "https"), (":authority", "slow.example.test")]
    first = c.request(hdrs + [(":path", "/dialer")])
    rest = [c.request(hdrs + [(":path", "/queued-%d" % i)]) for i in range(3)]
    c.flush()
    # the dialer leaves during the handshake: once the upstream has accepted its connection
    # (requests read in one go could otherwise end it before vaultgate even connects)
    deadline = time.monotonic() + 5
    while slow.accepts < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    c.h2.reset_stream(first, error_code=8)
    c.flush()
    for i, sid in enumerate(rest):
        st, rst, body = c.outcome(sid, timeout=10)
        t.check(st == 200 and body == b"conn=1 /queued-%d" % i, "queued request %d after its "
                "dialer left: %r %r %r" % (i, st, rst, body))
    c.close()
    t.check([r.header(":path")[0] for r in slow.requests if r.header(":path")[0] == "/dialer"]
            == [], "the request that went away reached the upstream")
    t.check(slow.accepts == 2 and slow.conns[1].streams == 3, "slow dial: %d connections %r" %
            (slow.accepts, [(x.streams, x.peak) for x in slow.conns]))
finally:
    vg.stop()
    up.stop()
    five.stop()
    slow.stop()
log = vg.stderr()
t.check(SECRET not in log, "secret in the log")
reqs = vg.events("request")
t.check(len([e for e in reqs if e.get("status") == 200]) == 83,
        "request lines: %d" % len(reqs))
