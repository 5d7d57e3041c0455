#!/usr/bin/env python3
"""--user: vaultgate binds as root, then runs as the user; the state directory and the SQLite
audit store belong to that user; requests are served and SIGTERM still stops it cleanly."""
import os
import pwd
import vgtest as t

if os.geteuid() != 0:
    t.skip("needs root to drop privileges")
try:
    nobody = pwd.getpwnam("nobody")
except KeyError:
    t.skip("no user nobody")
d0 = t.tmpdir()
os.chmod(d0, 0o711)  # the user must be able to reach its state directory
d, certs, up, vg = t.setup(audit="sqlite", extra=["--user", "nobody"])
try:
    uids = [l for l in open("/proc/%d/status" % vg.proc.pid) if l.startswith(("Uid:", "Gid:"))]
    t.check(all(f == str(nobody.pw_uid) for f in uids[0].split()[1:]), "uids %r" % uids)
    t.check(all(f == str(nobody.pw_gid) for f in uids[1].split()[1:]), "gids %r" % uids)
    t.check(os.stat(vg.state).st_uid == nobody.pw_uid, "state dir owner")
    t.check(os.stat(os.path.join(vg.state, "audit.db")).st_uid == nobody.pw_uid, "audit.db owner")
    r = vg.request("api.example.test", b"GET / HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 200, "%r" % r)
    r = vg.request("blocked.example.test", b"GET / HTTP/1.1\r\nHost: blocked.example.test\r\n\r\n")
    t.check(r.status == 403, "%r" % r)
finally:
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s:\n%s" % (rc, vg.stderr()))
