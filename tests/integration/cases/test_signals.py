#!/usr/bin/env python3
"""Signals (SPEC §8): with audit counts pending in the SQLite store (refused requests just
made), SIGUSR1 and SIGUSR2 - what logrotate's postrotate sends - and every other signal that
would end a process by default but means nothing to vaultgate (SIGALRM, SIGVTALRM, SIGPROF,
SIGXFSZ, SIGTTIN, SIGTTOU, SIGSTKFLT, SIGIO, real-time signals) are logged and change nothing:
the process keeps serving. SIGQUIT then stops it cleanly, exit 0, and not one count is lost.
SIGXCPU and SIGPWR stop it cleanly as well (separate runs), counts complete."""
import os
import signal
import time
import vgtest as t

BLOCKED = b"GET / HTTP/1.1\r\nHost: blocked.example.test\r\nConnection: close\r\n\r\n"
IGNORED = [signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF,
           signal.SIGXFSZ, signal.SIGTTIN, signal.SIGTTOU, getattr(signal, "SIGSTKFLT", 16),
           signal.SIGIO, signal.SIGRTMIN, signal.SIGRTMIN + 5, signal.SIGRTMAX]
NAMES = {getattr(signal, "SIGSTKFLT", 16): "SIGSTKFLT", signal.SIGRTMIN: "SIGRTMIN",
         signal.SIGRTMIN + 5: "SIGRTMIN+5", signal.SIGRTMAX: "SIGRTMIN+%d" %
         (signal.SIGRTMAX - signal.SIGRTMIN)}


def name(sig):
    return NAMES.get(sig) or signal.Signals(sig).name


def refuse(vg, n):
    for _ in range(n):
        r = vg.request("blocked.example.test", BLOCKED)
        t.check(r.status == 403, "blocked host: %r" % r)
    return n


def counts(vg):
    blocked = t.audit_rows(vg, "blocked")
    routes = t.audit_rows(vg, "routes")
    seen = sum(r["seen_count"] for r in blocked if r["host"] == "blocked.example.test")
    refused = sum(r["count"] for r in routes if r["route"] == "refused")
    return seen, refused


def stop_with(sig, sub):
    """A fresh run in its own directory: refusals, then sig at once: exit 0, counts complete."""
    d = os.path.join(t.tmpdir(), sub)
    os.makedirs(d, exist_ok=True)
    vg = t.Vaultgate(d, t.example_vault(), audit="sqlite")
    vg.start()
    total = refuse(vg, 12)
    rc = vg.stop(sig)
    t.check(rc == 0, "%s: exit %s:\n%s" % (name(sig), rc, vg.stderr()))
    t.check(counts(vg) == (total, total), "%s lost counts: %r, want %d" %
            (name(sig), counts(vg), total))
    t.check(("%s from pid" % name(sig)) in vg.stderr() and '"reason":"stopped"' in vg.stderr(),
            "%s: no stop lines" % name(sig))


d, certs, up, vg = t.setup(names=("api.example.test", "blocked.example.test"), audit="sqlite")
total = 0
try:
    for sig in IGNORED:
        total += refuse(vg, 3)          # the first count is written at once, the rest pending
        vg.proc.send_signal(sig)
        line = "%s from pid" % name(sig)
        t.check(t.wait_for(lambda: line in vg.stderr(), timeout=30),
                "no log line for %s:\n%s" % (name(sig), vg.stderr()[-2000:]))
        t.check(vg.proc.poll() is None, "%s ended vaultgate (exit %s)" %
                (name(sig), vg.proc.returncode))
        ev = [e for e in vg.events("signal") if e.get("detail", "").startswith(line)]
        t.check(ev and ev[-1].get("reason") == "signal_ignored" and
                ev[-1]["detail"].endswith(": ignored"), "%s: %r" % (name(sig), ev))
        st, _ = vg.admin_get("/healthz")
        t.check(st == 200, "/healthz after %s: %d" % (name(sig), st))
    r = vg.request("api.example.test", b"GET / HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 200, "not serving after the ignored signals: %r" % r)
    total += refuse(vg, 5)
    time.sleep(0.05)
finally:
    rc = vg.stop(signal.SIGQUIT)
    up.stop()
t.check(rc == 0, "SIGQUIT: exit %s:\n%s" % (rc, vg.stderr()[-2000:]))
t.check("SIGQUIT from pid" in vg.stderr() and '"reason":"stopped"' in vg.stderr(),
        "SIGQUIT: no clean stop in the log")
t.check(counts(vg) == (total, total), "counts lost: %r, want %d" % (counts(vg), total))
t.log("%d ignored signals logged, served throughout; SIGQUIT: exit 0, %d refusals counted" %
      (len(IGNORED), total))

for sig, sub in ((signal.SIGXCPU, "xcpu"), (signal.SIGPWR, "pwr")):
    stop_with(sig, sub)
t.log("SIGXCPU and SIGPWR: clean stops, counts complete")
