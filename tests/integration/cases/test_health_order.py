#!/usr/bin/env python3
"""The admin API answers only once every listener accepts connections (SPEC §7): 40 starts,
each polling /healthz as fast as it can; the moment it answers, a TLS handshake with the HTTPS
listener (and a TCP connect to the plain-HTTP one) must complete. The SQLite audit store in a
fresh state directory and four workers make start-up long enough for an early answer to show."""
import os
import socket
import ssl

import vgtest as t

STARTS = 40

t.require_binary()
d = t.tmpdir()
early = []
for n in range(STARTS):
    run = os.path.join(d, "run%d" % n)
    os.mkdir(run)
    vg = t.Vaultgate(run, t.example_vault(), audit="sqlite", threads=4, http=True)
    vg.start(wait=False)
    try:
        answered = False
        while not answered:
            if vg.proc.poll() is not None:
                t.fail("start %d: vaultgate exited %d:\n%s" % (n, vg.proc.returncode, vg.stderr()))
            try:
                st, _ = vg.admin_get("/healthz")
            except OSError:
                continue
            t.check(st == 200, "start %d: /healthz answered %d" % (n, st))
            answered = True
        try:
            s = vg.tls_client("api.example.test")
            t.check(s.version() is not None, "start %d: no TLS session" % n)
            s.close()
            socket.create_connection(("127.0.0.1", vg.http_port), timeout=10).close()
        except (OSError, ssl.SSLError) as e:
            early.append("start %d: /healthz answered, then the listener: %r" % (n, e))
        t.check(vg.stop() == 0, "start %d: exit %r" % (n, vg.proc.returncode))
    finally:
        vg.kill()
t.check(not early, "%d of %d starts answered /healthz before a listener accepted:\n%s"
        % (len(early), STARTS, "\n".join(early)))
t.log("%d starts: every listener accepted once /healthz answered" % STARTS)
