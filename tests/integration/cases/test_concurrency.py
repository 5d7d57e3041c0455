#!/usr/bin/env python3
"""1000 concurrent client connections, all open at once, each served a request by one
vaultgate process (2 workers) without an error.

Waits are for events, with deadlines no loaded machine reaches: the proxy's handshake, head and
upstream timeouts are raised to 300 s (a python client and a python upstream making 1000
handshakes each on a busy machine, under ASan, can pass the 10 s defaults, and the first
connections wait for the last before they send their heads: the 30 s head timeout reset some);
every connection is open before any request is sent."""
import asyncio
import collections
import resource
import vgtest as t

N = 1000
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if hard < 4 * N + 200:
    t.skip("RLIMIT_NOFILE hard limit %d is too low for %d connections" % (hard, N))
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # inherited by vaultgate

SLOW = ["--timeout", "handshake=300", "--timeout", "head=300", "--timeout", "connect=300",
        "--timeout", "upstream-handshake=300"]
d, certs, up, vg = t.setup(threads=2, extra=SLOW)


async def one(i, ctx, opened, go, sem):
    async with sem:  # handshakes in flight at once (the client is python)
        r, w = await asyncio.open_connection("127.0.0.1", vg.port, ssl=ctx,
                                             server_hostname="api.example.test",
                                             ssl_handshake_timeout=300)
    opened.append(i)
    await go.wait()
    w.write(b"GET /c%d HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n" % i)
    data = await r.read()
    w.close()
    return data


async def main():
    ctx = vg.client_ctx()
    opened, go = [], asyncio.Event()
    sem = asyncio.Semaphore(200)
    tasks = [asyncio.ensure_future(one(i, ctx, opened, go, sem)) for i in range(N)]
    while len(opened) < N:
        done = [x for x in tasks if x.done()]
        for x in done:
            if x.exception():
                raise x.exception()
        await asyncio.sleep(0.05)
    st, body = vg.admin_get("/metrics")
    active = [l for l in body.decode().splitlines() if l.startswith("vaultgate_connections_active")]
    go.set()
    return await asyncio.gather(*tasks), active


try:
    results, active = asyncio.run(asyncio.wait_for(main(), 240))
    ok = sum(1 for x in results if x.startswith(b"HTTP/1.1 200 ") and x.endswith(b"ok"))
    if ok != N:
        seen = collections.Counter(x.split(b"\r\n", 1)[0][:60] for x in results
                                   if not (x.startswith(b"HTTP/1.1 200 ") and x.endswith(b"ok")))
        t.fail("%d of %d answered 200; the others: %r; upstream errors: %r; %s" %
               (ok, N, dict(seen), up.errors[:3],
                [l for l in t.metrics_text(vg).splitlines() if "upstream_errors" in l]))
    t.check(active and int(float(active[0].split()[-1])) >= N, "connections_active %r" % active)
    t.check(len(up.requests) == N, "upstream saw %d requests" % len(up.requests))
finally:
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s" % rc)
errs = [e for e in vg.events() if e.get("level") == "error"]
t.check(not errs, "errors logged: %r" % errs[:3])
t.log("%d concurrent connections served" % N)
