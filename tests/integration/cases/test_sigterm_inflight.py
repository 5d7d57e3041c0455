#!/usr/bin/env python3
"""SIGTERM while a response is streaming: new connections are refused while it streams (the
upstream holds the response's second half until the case has seen the refusal), the request in
flight completes, vaultgate exits 0 once it is done, not at the end of its 10 s grace (no
grace_expired line); SIGINT on an idle process exits 0 too."""
import os
import signal
import socket
import threading
import time
import vgtest as t


release = threading.Event()


def handler(req, ci):
    return [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst",
            ("call", lambda: release.wait(120)), b"-last"]


def accepting():
    try:
        socket.create_connection(("127.0.0.1", vg.port), timeout=5).close()
        return True
    except OSError:
        return False


d, certs, up, vg = t.setup(handler=handler)
result = {}


def client():
    try:
        result["r"] = vg.request("api.example.test",
                                 b"GET /slow HTTP/1.1\r\nHost: api.example.test\r\n"
                                 b"Connection: close\r\n\r\n")
    except BaseException as e:  # noqa
        result["e"] = e


th = threading.Thread(target=client)
th.start()
t.check(t.wait_for(lambda: up.requests), "request did not reach the upstream")
t0 = time.monotonic()
vg.proc.send_signal(signal.SIGTERM)
refused = t.wait_for(lambda: not accepting(), timeout=30, step=0.02)
release.set()
rc = vg.proc.wait(60)
took = time.monotonic() - t0
th.join(60)
up.stop()
t.check("r" in result, "client failed: %r" % result.get("e"))
t.check(result["r"].status == 200 and result["r"].body == b"first-last",
        "in-flight response: %r" % result["r"])
t.check(rc == 0, "exit %d" % rc)
t.check(refused, "listener still accepting after SIGTERM")
t.check(not [e for e in vg.events("stop") if e.get("reason") == "grace_expired"],
        "the in-flight exchange ended only at the grace's end")
t.log("stopped %.1f s after SIGTERM" % took)

os.makedirs(d + "/two", exist_ok=True)
vg2 = t.Vaultgate(d + "/two", t.example_vault()).start()
rc2 = vg2.stop(signal.SIGINT)
t.check(rc2 == 0, "SIGINT exit %d" % rc2)
