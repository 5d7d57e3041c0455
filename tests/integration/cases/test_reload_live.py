#!/usr/bin/env python3
"""SIGHUP under load. Client threads (keep-alive and new connections) run while the vault
changes: no request that the old or the new policy allows fails; a host the new vault blocks is
refused on the first request that starts after the reload (also on a keep-alive connection
opened before it); the file secret rotated on disk reaches the upstream after SIGHUP. Then a
broken vault (bad JSON, then a missing file) keeps the policy and raises a status warning that
the next good reload clears, and a vault readable by group/others is warned about (status and
log) until it is 0600 again; an empty vault is a status note (nothing to enforce), not a
warning."""
import json
import os
import signal
import threading
import time
import vgtest as t

OLD, NEW = "sk-canary-ROT-OLD-7777", "sk-canary-ROT-NEW-8888"
NAMES = ("api.example.test", "a.example.test", "b.example.test")
d0 = t.tmpdir()
secret_path = os.path.join(d0, "api.secret")


def write_secret(v):
    tmp = secret_path + ".tmp"
    with open(tmp, "w") as f:
        f.write(v + "\n")
    os.chmod(tmp, 0o600)
    os.rename(tmp, secret_path)


def vault(b_policy):
    return t.example_vault(secrets={"API_KEY": {"file": secret_path}},
                           hosts={"a.example.test": "allow", "b.example.test": b_policy})


write_secret(OLD)
vpath = os.path.join(d0, "vault.json")


def write_vault(v, mode=0o600):
    tmp = vpath + ".tmp"
    with open(tmp, "w") as f:
        f.write(v if isinstance(v, str) else json.dumps(v))
    os.chmod(tmp, mode)
    os.rename(tmp, vpath)


write_vault(vault("allow"))
d, certs, up, vg = t.setup(names=NAMES, vault=vpath, threads=2, audit="sqlite")


def reload():
    n = len(vg.events("reload"))
    vg.proc.send_signal(signal.SIGHUP)
    t.check(t.wait_for(lambda: len(vg.events("reload")) > n, timeout=30), "no reload event")
    return time.monotonic()


def req(host, close=True):
    return (b"GET /r HTTP/1.1\r\nHost: " + host.encode() + b"\r\n" +
            (b"Connection: close\r\n" if close else b"") + b"\r\n")


stop = threading.Event()
results = []  # (start, end, host, status or exception text)
lock = threading.Lock()


def new_conn_loop(host):
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            st = vg.request(host, req(host)).status
        except Exception as e:  # noqa
            st = "error %r" % e
        with lock:
            results.append((t0, time.monotonic(), host, st))


def keepalive_loop(host):
    s = None
    while not stop.is_set():
        t0 = time.monotonic()
        try:
            if s is None:
                s = vg.tls_client(host)
            s.sendall(req(host, close=False))
            r, _ = t.parse_response(b"", reader=lambda: s.recv(65536))
            st = r.status
            if r.header("Connection") == "close":
                s.close()
                s = None
        except Exception as e:  # noqa
            st = "error %r" % e
            s = None
        with lock:
            results.append((t0, time.monotonic(), host, st))
    if s is not None:
        s.close()


try:
    t.check(vg.status()["warnings"] == [], "warnings at start: %r" % vg.status()["warnings"])
    # a keep-alive connection to b, opened under the old policy
    kb = vg.tls_client("b.example.test")
    kb.sendall(req("b.example.test", close=False))
    r, _ = t.parse_response(b"", reader=lambda: kb.recv(65536))
    t.check(r.status == 200, "b before the reload: %r" % r)

    threads = [threading.Thread(target=f, args=(h,)) for f in (new_conn_loop, keepalive_loop)
               for h in NAMES]
    for th in threads:
        th.start()
    time.sleep(1.0)
    write_secret(NEW)
    write_vault(vault("block"))
    t_sig = time.monotonic()
    t_seen = reload()
    # the keep-alive connection opened before the reload: its next request is refused
    kb.sendall(req("b.example.test", close=False))
    r, _ = t.parse_response(b"", reader=lambda: kb.recv(65536))
    t.check(r.status == 403, "b on an old keep-alive connection after the reload: %r" % r)
    kb.close()
    time.sleep(1.0)
    stop.set()
    for th in threads:
        th.join(10)

    errors = [x for x in results if not isinstance(x[3], int)]
    t.check(not errors, "%d failed requests, e.g. %r" % (len(errors), errors[:3]))
    for host in ("api.example.test", "a.example.test"):
        bad = [x for x in results if x[2] == host and x[3] != 200]
        t.check(not bad, "%s not always 200: %r" % (host, bad[:3]))
    b_before = [x for x in results if x[2] == "b.example.test" and x[1] < t_sig]
    b_after = [x for x in results if x[2] == "b.example.test" and x[0] > t_seen]
    t.check(b_before and all(x[3] == 200 for x in b_before), "b before: %r" % b_before[:3])
    t.check(b_after and all(x[3] == 403 for x in b_after),
            "b after the reload: %r" % [x for x in b_after if x[3] != 403][:3])
    t.log("%d requests during the reload (%d to b after it)" % (len(results), len(b_after)))
    auth = [r.header("Authorization") for r in up.requests
            if r.header("Host") == ["api.example.test"]]
    t.check(all(a in (["Bearer " + OLD], ["Bearer " + NEW]) for a in auth), "auth %r" % auth[:3])
    t.check(["Bearer " + OLD] in auth and ["Bearer " + NEW] in auth, "no rotation seen")
    vg.request("api.example.test", req("api.example.test"))
    t.check(up.requests[-1].header("Authorization") == ["Bearer " + NEW], "rotated secret")

    # broken vaults keep the policy and warn until a good reload
    for broken in ("{ not json", None):
        if broken is None:
            os.unlink(vpath)
        else:
            write_vault(broken)
        reload()
        w = vg.status()["warnings"]
        t.check(any(x.startswith("vault reload failed, the previous policy stays") for x in w),
                "no warning for a broken vault: %r" % w)
        t.check(vg.request("b.example.test", req("b.example.test")).status == 403, "policy lost")
        t.check(vg.request("api.example.test", req("api.example.test")).status == 200, "api")
    write_vault(vault("allow"))
    reload()
    t.check(vg.status()["warnings"] == [], "not cleared: %r" % vg.status()["warnings"])
    t.check(vg.request("b.example.test", req("b.example.test")).status == 200, "b allowed again")

    # a vault readable by others: warned until it is 0600 again
    os.chmod(vpath, 0o644)
    reload()
    w = vg.status()["warnings"]
    t.check(any("readable by group or others" in x and "0644" in x for x in w), "mode: %r" % w)
    t.check(t.wait_for(lambda: vg.events("vault_mode")), "no vault_mode log line")
    # readable by a group vaultgate is not in: warned; by its own group only (a Kubernetes
    # Secret under the pod's fsGroup is 0440): not
    os.chmod(vpath, 0o640)
    os.chown(vpath, -1, 65534)
    reload()
    w = vg.status()["warnings"]
    t.check(any("readable by group or others" in x and "0640" in x for x in w), "group: %r" % w)
    os.chown(vpath, -1, os.getegid())  # vaultgate runs as this test's user here
    reload()
    t.check(vg.status()["warnings"] == [], "own group warned: %r" % vg.status()["warnings"])
    os.chmod(vpath, 0o600)
    reload()
    t.check(vg.status()["warnings"] == [], "mode warning stays: %r" % vg.status()["warnings"])

    # nothing to enforce is a note, not a warning
    write_vault(t.example_vault(secrets={}, rules=[], hosts={}))
    reload()
    st = vg.status()
    t.check(any(x.startswith("nothing to enforce") for x in st["notes"]), "notes %r" % st["notes"])
    t.check(st["warnings"] == [], "warnings for an empty vault: %r" % st["warnings"])
finally:
    stop.set()
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s" % rc)
err = vg.stderr()
t.check(OLD not in err and NEW not in err, "a secret in the log")
