#!/usr/bin/env python3
"""Out of file descriptors: vaultgate neither spins nor floods its log (accepting pauses for
100 ms at a time), keeps serving the connections it has, and accepts again once descriptors
are free."""
import resource
import socket
import ssl
import time
import vgtest as t

LIMIT = 64


def lower_limit():
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


d, certs, up, vg = t.setup(start=False)
vg.proc = t.subprocess.Popen(vg.args, stdout=t.subprocess.DEVNULL,
                             stderr=open(vg.stderr_path, "wb"), preexec_fn=lower_limit)
vg.wait_ready()
try:
    keep = vg.tls_client("api.example.test")
    # one exchange first, so a pooled upstream connection exists (a new one needs a descriptor)
    keep.sendall(b"GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    r, _ = t.parse_response(b"", reader=lambda: keep.recv(65536))
    t.check(r.status == 200, "warm-up %r" % r)
    socks = []
    for _ in range(LIMIT + 20):  # more than vaultgate can hold
        try:
            socks.append(socket.create_connection(("127.0.0.1", vg.port), timeout=2))
        except OSError:
            break
    time.sleep(1.0)
    cpu = sum(int(x) for x in open("/proc/%d/stat" % vg.proc.pid).read().split()[13:15])
    time.sleep(1.0)
    cpu2 = sum(int(x) for x in open("/proc/%d/stat" % vg.proc.pid).read().split()[13:15])
    t.check(cpu2 - cpu < 30, "vaultgate spins while out of descriptors (%d ticks/s)" % (cpu2 - cpu))
    errors = len(vg.events("accept_error"))
    t.check(errors < 40, "%d accept_error lines in 2 s" % errors)
    keep.sendall(b"GET / HTTP/1.1\r\nHost: api.example.test\r\n\r\n")
    r, _ = t.parse_response(b"", reader=lambda: keep.recv(65536))
    t.check(r.status == 200, "existing connection no longer served: %r" % r)
    for s in socks:
        s.close()

    def served():
        try:
            return vg.exchange("api.example.test", b"GET / HTTP/1.1\r\nHost: api.example.test"
                               b"\r\nConnection: close\r\n\r\n").startswith(b"HTTP/1.1 200 ")
        except (OSError, ssl.SSLError):
            return False

    t.check(t.wait_for(served, step=0.2), "not accepting again")
    keep.close()
finally:
    vg.stop()
    up.stop()
