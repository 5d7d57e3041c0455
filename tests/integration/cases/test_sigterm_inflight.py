#!/usr/bin/env python3
"""SIGTERM while a response is streaming: new connections are refused at once, the request in
flight completes, vaultgate exits 0 (well inside its 10 s grace); SIGINT on an idle process
exits 0 too."""
import os
import signal
import socket
import threading
import time
import vgtest as t


def handler(req, ci):
    return [b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nfirst", ("sleep", 1.5), b"-last"]


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
for _ in range(100):
    if up.requests:
        break
    time.sleep(0.02)
t.check(up.requests, "request did not reach the upstream")
t0 = time.monotonic()
vg.proc.send_signal(signal.SIGTERM)
time.sleep(0.3)
refused = False
try:
    socket.create_connection(("127.0.0.1", vg.port), timeout=1).close()
except OSError:
    refused = True
rc = vg.proc.wait(15)
took = time.monotonic() - t0
th.join(5)
up.stop()
t.check("r" in result, "client failed: %r" % result.get("e"))
t.check(result["r"].status == 200 and result["r"].body == b"first-last",
        "in-flight response: %r" % result["r"])
t.check(rc == 0, "exit %d" % rc)
t.check(refused, "listener still accepting after SIGTERM")
t.check(took < 8, "stop took %.1fs" % took)

os.makedirs(d + "/two", exist_ok=True)
vg2 = t.Vaultgate(d + "/two", t.example_vault()).start()
rc2 = vg2.stop(signal.SIGINT)
t.check(rc2 == 0, "SIGINT exit %d" % rc2)
