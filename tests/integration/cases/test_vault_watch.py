#!/usr/bin/env python3
"""`run --vault-watch` reloads the vault when its file changes, exactly as SIGHUP does (SPEC §13):
the vault lives in a directory laid out as Kubernetes mounts a Secret (vault.json ->
..data/vault.json, ..data -> a timestamped directory) and is changed in three ways - the ..data
symlink swapped (the Kubernetes atomic writer: a new directory, ..data_tmp renamed over ..data,
the old directory removed), a temporary file renamed over vault.json, vault.json rewritten in
place - each of which changes what the next request gets; an invalid vault written in place
keeps the old policy and raises the status warning; SIGHUP still reloads.
vaultgate_vault_reloads_total{result} counts each reload, by watch or signal, as the log does
(one reload/vault_loaded or reload/vault_invalid per reload), and no secret reaches the log,
status or metrics."""
import json
import os
import shutil
import signal
import vgtest as t

SECRETS = ["sk-canary-WATCH-%d-%s" % (i, "x" * 8) for i in range(6)]


def vault(i, free="allow"):
    return json.dumps(t.example_vault(secrets={"API_KEY": {"value": SECRETS[i]}},
                                      hosts={"free.example.test": free}))


d = t.tmpdir()
sec = os.path.join(d, "secret")
os.makedirs(sec)


def write(path, text):
    """One open(O_TRUNC), write and close: a 0600 file from the start, no chmod after it."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def k8s_generation(n, text):
    """What the kubelet's atomic writer does for one update of a Secret volume."""
    gen = "..2026_12_02_00_00_0%d.%d" % (n, 1000 + n)
    os.mkdir(os.path.join(sec, gen), 0o755)
    write(os.path.join(sec, gen, "vault.json"), text)
    tmp = os.path.join(sec, "..data_tmp")
    os.symlink(gen, tmp)
    old = os.readlink(os.path.join(sec, "..data")) if os.path.islink(
        os.path.join(sec, "..data")) else None
    os.rename(tmp, os.path.join(sec, "..data"))
    if old is not None:
        shutil.rmtree(os.path.join(sec, old))


k8s_generation(1, vault(0))
vpath = os.path.join(sec, "vault.json")
os.symlink("..data/vault.json", vpath)

certs = t.make_certs(d, ["api.example.test", "free.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"])
vg = t.Vaultgate(d, vpath, pins=[up.pin("api.example.test"), up.pin("free.example.test")],
                 upstream_ca=certs["ca"], extra=["--vault-watch"])
t.require_binary()
vg.start()


def get(host):
    return vg.request(host, b"GET / HTTP/1.1\r\nHost: " + host.encode() +
                      b"\r\nConnection: close\r\n\r\n")


def injected():
    r = get("api.example.test")
    t.check(r.status == 200, "api.example.test answered %d" % r.status)
    return up.requests[-1].header("Authorization")


def wait_secret(i, what):
    want = ["Bearer " + SECRETS[i]]
    t.check(t.wait_for(lambda: injected() == want, timeout=30, step=0.1),
            "%s: the new vault was not reloaded (got %r)\n%s" % (what, injected(), vg.stderr()))


try:
    t.check(injected() == ["Bearer " + SECRETS[0]], "first secret")

    # 1. the Kubernetes ..data swap
    k8s_generation(2, vault(1))
    wait_secret(1, "..data swap")

    # 2. a temporary file renamed over vault.json (the symlink replaced by a regular file)
    tmp = os.path.join(sec, ".vault.json.new")
    write(tmp, vault(2, free="block"))
    os.rename(tmp, vpath)
    wait_secret(2, "rename")
    t.check(get("free.example.test").status == 403, "free.example.test not blocked")

    # 3. rewritten in place
    write(vpath, vault(3, free="block"))
    wait_secret(3, "in-place rewrite")

    n = len(vg.events("reload"))
    # 4. an invalid vault in place: the old policy stays, the status warns
    write(vpath, "{ not json")
    t.check(t.wait_for(lambda: any("reload failed" in w for w in vg.status()["warnings"]),
                       timeout=30, step=0.1), "no warning for an invalid vault: %r" %
            vg.status()["warnings"])
    t.check(injected() == ["Bearer " + SECRETS[3]], "the old policy was not kept")
    t.check(get("free.example.test").status == 403, "the old host policy was not kept")
    ev = [e["reason"] for e in vg.events("reload")[n:]]
    t.check(ev == ["vault_changed", "vault_invalid"],
            "one reload, of the invalid vault, expected: %r" % ev)

    # 5. SIGHUP still reloads, and counts the same way
    write(vpath, vault(4))
    vg.proc.send_signal(signal.SIGHUP)
    wait_secret(4, "SIGHUP")
    t.check(get("free.example.test").status == 200, "free.example.test still blocked")
    st = vg.status()
    t.check(not any("reload failed" in w for w in st["warnings"]), "stale warning: %r" %
            st["warnings"])

    # the in-place write before the SIGHUP may start a reload by watch too, which can still be
    # going on: the counts are read once the metrics and the log agree
    def counts():
        m = t.metrics_text(vg)
        ev = vg.events("reload")
        c = (m, t.metric_value(m, 'vaultgate_vault_reloads_total{result="ok"}'),
             t.metric_value(m, 'vaultgate_vault_reloads_total{result="invalid"}'),
             t.metric_value(m, 'vaultgate_vault_reloads_total{result="relaunch"}'), ev,
             [e for e in ev if e.get("reason") == "vault_loaded"],
             [e for e in ev if e.get("reason") == "vault_invalid"],
             [e for e in ev if e.get("reason") == "vault_changed"])
        return c, (c[1] == len(c[5]) and c[2] == len(c[6]) and
                   len(c[7]) == len(c[5]) + len(c[6]) - 1)

    t.wait_for(lambda: counts()[1])
    (m, ok, invalid, relaunch, ev, loaded, failed, changed), _ = counts()
    t.log("reloads: ok=%s invalid=%s relaunch=%s; log: %d loaded, %d failed" %
          (ok, invalid, relaunch, len(loaded), len(failed)))
    t.check(ok is not None and ok >= 4 and ok == len(loaded),
            "reloads ok=%s, log %d" % (ok, len(loaded)))
    t.check(invalid is not None and invalid >= 1 and invalid == len(failed),
            "reloads invalid=%s, log %d" % (invalid, len(failed)))
    t.check(relaunch == 0, "relaunch=%s" % relaunch)
    t.check(len(changed) >= 4 and len(changed) == len(loaded) + len(failed) - 1,
            "one reload/vault_changed line per reload by watch: %r" % ev)
    texts = {"log": vg.stderr(), "status": json.dumps(vg.status()), "metrics": m}
finally:
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s" % rc)
t.check_absent(texts, SECRETS)
t.check_absent({"log after stop": vg.stderr()}, SECRETS)
