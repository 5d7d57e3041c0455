#!/usr/bin/env python3
"""SIGHUP reloads the vault: a valid vault changes decisions for new requests (a host becomes
blocked, a secret changes); an invalid one keeps the old policy and raises a status warning; a
vault that needs catch-all routing warns `relaunch required`. /v1/status has every member."""
import json
import signal
import vgtest as t

OLD, NEW = "sk-canary-OLD-1111", "sk-canary-NEW-2222"
v1 = t.example_vault(secrets={"API_KEY": {"value": OLD}},
                     hosts={"blocked.example.test": "block", "free.example.test": "allow"})
d, certs, up, vg = t.setup(names=("api.example.test", "free.example.test"), vault=v1)


def get(host):
    return vg.request(host, b"GET / HTTP/1.1\r\nHost: " + host.encode() +
                      b"\r\nConnection: close\r\n\r\n")


def reload_with(v):
    with open(vg.vault_path, "w") as f:
        f.write(v if isinstance(v, str) else json.dumps(v))
    n = len(vg.events("reload"))
    vg.proc.send_signal(signal.SIGHUP)
    t.check(t.wait_for(lambda: len(vg.events("reload")) > n), "no reload event")


try:
    st = vg.status()
    for k in ("version", "run", "mode", "mode_reason", "rules", "host_entries", "listeners",
              "audit", "warnings", "notes", "ca_sha256", "started_at"):
        t.check(k in st, "status lacks %s: %r" % (k, st))
    t.check(st["mode"] == "default" and st["rules"] == 1, "status %r" % st)
    t.check(st["listeners"] == ["https 127.0.0.1:%d" % vg.port], "listeners %r" % st["listeners"])
    t.check(len(st["ca_sha256"]) == 64, "ca_sha256")
    t.check(get("api.example.test").status == 200 and get("free.example.test").status == 200, "")
    t.check(up.requests[0].header("Authorization") == ["Bearer " + OLD], "old secret")

    v2 = t.example_vault(secrets={"API_KEY": {"value": NEW}},
                         hosts={"blocked.example.test": "block", "free.example.test": "block"})
    reload_with(v2)
    t.check(get("free.example.test").status == 403, "free.example.test not blocked after reload")
    get("api.example.test")
    t.check(up.requests[-1].header("Authorization") == ["Bearer " + NEW], "new secret")
    t.check(not any("relaunch" in w for w in vg.status()["warnings"]), "spurious warning")

    reload_with("{ not json")
    w = vg.status()["warnings"]
    t.check(any("reload failed" in x for x in w), "no warning for an invalid vault: %r" % w)
    t.check(get("free.example.test").status == 403, "old policy not kept")

    v3 = dict(v2, host_policy={"default": "block", "hosts": {"new.example.test": "allow"}})
    reload_with(v3)
    w = vg.status()["warnings"]
    t.check(any("relaunch required" in x for x in w), "no relaunch warning: %r" % w)
    t.check(vg.status()["mode"] == "default", "the running mode changed")
finally:
    rc = vg.stop()
    up.stop()
t.check(rc == 0, "exit %s" % rc)
t.check(OLD not in vg.stderr() and NEW not in vg.stderr(), "secret in the log")
