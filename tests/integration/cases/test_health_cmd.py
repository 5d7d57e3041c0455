#!/usr/bin/env python3
"""`vaultgate health` (the image's HEALTHCHECK, SPEC §13): exit 0 when the admin API answers 200
on /healthz (or /readyz with --ready), over TCP and a unix socket; exit 1 with one line when the
gateway is gone or answers something else (a 503 from /readyz); a name instead of an address
is a usage error (no lookup is made)."""
import os
import socket
import subprocess
import threading
import vgtest as t


def health(*args):
    p = subprocess.run([t.VG_BIN, "health"] + list(args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=30)
    return p.returncode, p.stdout.decode(), p.stderr.decode()


d, certs, up, vg = t.setup()
admin = "127.0.0.1:%d" % vg.admin_port
try:
    for args in ([], ["--ready"]):
        rc, out, err = health("--admin", admin, *args)
        t.check(rc == 0 and out == "" and err == "", "health %s: %d %r" % (args, rc, err))
finally:
    t.check(vg.stop() == 0, "exit")
rc, out, err = health("--admin", admin)
t.check(rc == 1 and err.count("\n") == 1 and "Connection refused" in err, "gone: %d %r" % (rc, err))

# a unix-socket admin API
sock = os.path.join(d, "admin.sock")
os.makedirs(os.path.join(d, "u"))
vg2 = t.Vaultgate(os.path.join(d, "u"), t.example_vault())
vg2.args[vg2.args.index("--admin") + 1] = "unix:" + sock
vg2.start(wait=False)
t.check(t.wait_for(lambda: health("--admin", "unix:" + sock)[0] == 0, timeout=15),
        "unix socket: %r" % (health("--admin", "unix:" + sock),))
t.check(vg2.stop() == 0, "exit (unix)")

# something that answers 503
srv = socket.socket()
srv.bind(("127.0.0.1", 0))
srv.listen(4)


def serve():
    c, _ = srv.accept()
    c.recv(4096)
    c.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
    c.close()


th = threading.Thread(target=serve, daemon=True)
th.start()
rc, out, err = health("--admin", "127.0.0.1:%d" % srv.getsockname()[1], "--ready")
t.check(rc == 1 and err.endswith("/readyz answered 503\n") and err.count("\n") == 1,
        "503: %d %r" % (rc, err))
srv.close()

for args, needle in [(["--admin", "localhost:9090"], "not an IP address and port"),
                     (["--admin", "127.0.0.1"], "expected host:port"),
                     (["--bogus"], "unknown option '--bogus'")]:
    rc, out, err = health(*args)
    t.check(rc == 2 and err.count("\n") == 1 and needle in err, "%s: %d %r" % (args, rc, err))
up.stop()
