#!/usr/bin/env python3
"""The container image (SPEC §13), built from deploy/container/Containerfile on a local Debian 12
base (tests/integration/lib/container.py):
- the image holds vaultgate, nft, the CA certificates, the man pages and example vaults, and no
  shell, compiler, linker or package manager (checked in `podman export` of a container, since
  nothing can run inside it but vaultgate);
- its config: user 65532, ENTRYPOINT ["vaultgate"], SPEC §13's default CMD, STOPSIGNAL SIGTERM,
  a HEALTHCHECK on /healthz (`vaultgate health`);
- run with --read-only --cap-drop ALL --security-opt no-new-privileges and the state directory
  and a trust directory on volumes, on the host's loopback (--network host, 127.x addresses):
  the process is uid 65532 with no capability and no_new_privs on a read-only root; an
  injected request from the host reaches the fake upstream (a --resolve pin) with the secret; a
  blocked host gets 403; the CA is on the volume (the one /ca.pem serves) and --trust-out wrote
  its files beside it; `vaultgate health` in the container answers 0;
- `podman stop` (SIGTERM) ends it with exit 0, and the audit SQLite on the volume holds the
  route and the blocked host.
The image's size and its build time are logged (docs/operations.md states the size)."""
import json
import os
import ssl
import subprocess
import tarfile
import container as c
import vgtest as t

SECRET = "sk-canary-IMAGE-4242"
SPEC_CMD = ["run", "--vault", "/etc/vaultgate/vault.json", "--state-dir", "/var/lib/vaultgate",
            "--listen-https", "0.0.0.0:8443", "--listen-http", "0.0.0.0:8080", "--admin",
            "0.0.0.0:9090", "--admin-allow-remote"]

tag, build_secs = c.vaultgate_image()
size = c.image_size_mb(tag)
t.log("image size: %.1f MB (build %.1f s)" % (size, build_secs))

# ---- what the image holds -------------------------------------------------------------------
d = t.tmpdir()
name = "vgtest-image-%d" % os.getpid()
c.remove(name)
c.podman("create", "--name", name, tag)
export = os.path.join(d, "image.tar")
c.podman("export", "-o", export, name)
c.remove(name)
with tarfile.open(export) as tf:
    members = {m.name.lstrip("./"): m for m in tf.getmembers()}
os.unlink(export)
for want in ("usr/bin/vaultgate", "usr/sbin/nft", "etc/ssl/certs/ca-certificates.crt",
             "usr/share/man/man8/vaultgate.8", "usr/share/man/man5/vaultgate-vault.5",
             "usr/share/doc/vaultgate/vault.example.json", "etc/passwd", "var/lib/vaultgate"):
    t.check(want in members, "the image lacks /" + want)
t.check(members["var/lib/vaultgate"].uid == 65532, "/var/lib/vaultgate is not 65532's")
bad = [n for n in members if os.path.basename(n) in (
    "sh", "bash", "dash", "busybox", "gcc", "cc", "cc1", "ld", "ld.bfd", "as", "make", "apt",
    "apt-get", "dpkg", "perl", "python3") or n.startswith(("usr/include/", "usr/lib/gcc/"))]
t.check(not bad, "the image holds %r" % bad[:10])
t.log("image files: %d, no shell, compiler or package manager" % len(members))

# ---- its config -----------------------------------------------------------------------------
img = json.loads(c.podman("image", "inspect", tag).stdout)[0]
cfg = img["Config"]
t.check(cfg.get("User") == "65532:65532", "User %r" % cfg.get("User"))
t.check(cfg.get("Entrypoint") == ["vaultgate"], "Entrypoint %r" % cfg.get("Entrypoint"))
t.check(cfg.get("Cmd") == SPEC_CMD, "Cmd %r" % cfg.get("Cmd"))
t.check(cfg.get("StopSignal") == "SIGTERM", "StopSignal %r" % cfg.get("StopSignal"))
hc = (img.get("Healthcheck") or {}).get("Test")
t.check(hc == ["CMD", "vaultgate", "health", "--admin", "127.0.0.1:9090"], "Healthcheck %r" % hc)

# ---- a run: read-only, no capability, no new privileges, volumes ----------------------------
certs = t.make_certs(d, ["api.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"])
etc = os.path.join(d, "etc")
state = os.path.join(d, "state")
trust = os.path.join(d, "trust")
for p, mode in ((etc, 0o755), (state, 0o700), (trust, 0o755)):
    os.makedirs(p)
    os.chmod(p, mode)
    os.chown(p, 65532, 65532)
vault = os.path.join(etc, "vault.json")
with open(vault, "w") as f:
    json.dump(t.example_vault(secrets={"API_KEY": {"value": SECRET}}), f)
os.chmod(vault, 0o600)
os.chown(vault, 65532, 65532)
with open(certs["ca"]) as src, open(os.path.join(etc, "upstream-ca.pem"), "w") as dst:
    dst.write(src.read())
port, admin_port = t.free_port(), t.free_port()
admin = "127.0.0.1:%d" % admin_port
args = ["run", "--vault", "/etc/vaultgate/vault.json", "--state-dir", "/var/lib/vaultgate",
        "--listen-https", "127.0.0.1:%d" % port, "--listen-http", "none", "--admin", admin,
        "--resolve", up.pin("api.example.test"), "--upstream-ca",
        "/etc/vaultgate/upstream-ca.pem", "--trust-out", "/run/vaultgate-trust",
        "--threads", "1"]
ctr = "vgtest-run-%d" % os.getpid()
c.remove(ctr)
try:
    c.podman("run", "-d", "--name", ctr, "--network", "host", "--read-only", "--cap-drop", "ALL",
             "--security-opt", "no-new-privileges", "-v", etc + ":/etc/vaultgate:ro",
             "-v", state + ":/var/lib/vaultgate", "-v", trust + ":/run/vaultgate-trust", tag,
             *args)

    def ready():
        if c.inspect(ctr, "{{.State.Running}}") != "true":
            t.fail("the container stopped:\n" + c.podman("logs", ctr, check=False).stderr)
        return c.podman("exec", ctr, "vaultgate", "health", "--ready", "--admin", admin,
                        check=False).returncode == 0
    t.check(t.wait_for(ready, timeout=30, step=0.2), "not ready:\n" +
            c.podman("logs", ctr, check=False).stderr)

    pid = c.inspect(ctr, "{{.State.Pid}}")
    status = dict(ln.split(":\t", 1) for ln in open("/proc/%s/status" % pid).read().splitlines()
                  if ":\t" in ln)
    t.check(status["Uid"].split()[:2] == ["65532", "65532"], "Uid %r" % status["Uid"])
    t.check(int(status["CapEff"], 16) == 0 and int(status["CapPrm"], 16) == 0 and
            int(status["CapBnd"], 16) == 0, "capabilities %r %r" % (status["CapEff"],
                                                                   status["CapBnd"]))
    t.check(status["NoNewPrivs"].strip() == "1", "NoNewPrivs %r" % status["NoNewPrivs"])
    root = [ln.split() for ln in open("/proc/%s/mountinfo" % pid) if ln.split()[4] == "/"]
    t.check(root and "ro" in root[-1][5].split(","), "root mount %r" % root)
    t.check(c.inspect(ctr, "{{.HostConfig.ReadonlyRootfs}}") == "true", "not --read-only")

    # an injected request from the host, trusting the CA on the volume
    ca_pem = open(os.path.join(state, "ca.pem")).read()
    ctx = ssl.create_default_context(cadata=ca_pem)
    import socket
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20),
                        server_hostname="api.example.test")
    s.sendall(b"GET /v1/x HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n")
    r = t.parse_response(t.read_until_close(s))[0]
    s.close()
    t.check(r.status == 200, "injected request answered %d" % r.status)
    t.check(up.requests and up.requests[-1].header("Authorization") == ["Bearer " + SECRET],
            "the upstream did not get the secret")
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20),
                        server_hostname="blocked.example.test")
    s.sendall(b"GET / HTTP/1.1\r\nHost: blocked.example.test\r\nConnection: close\r\n\r\n")
    r = t.parse_response(t.read_until_close(s))[0]
    s.close()
    t.check(r.status == 403, "blocked host answered %d" % r.status)
    import http.client
    hc = http.client.HTTPConnection("127.0.0.1", admin_port, timeout=10)
    hc.request("GET", "/ca.pem")
    t.check(hc.getresponse().read().decode() == ca_pem, "/ca.pem is not the CA on the volume")
    hc.close()
    t.check(sorted(os.listdir(trust)) == ["bundle.pem", "ca.pem", "trust.env", "truststore.p12",
                                          "wgetrc"], "trust volume: %r" % os.listdir(trust))
    t.check("export SSL_CERT_FILE=/run/vaultgate-trust/bundle.pem" in
            open(os.path.join(trust, "trust.env")).read(), "trust.env paths")
    t.check(open(os.path.join(trust, "ca.pem")).read() == ca_pem, "trust ca.pem")
    t.check(c.podman("exec", ctr, "vaultgate", "health", "--admin", admin,
                     check=False).returncode == 0, "vaultgate health in the container")

    # SIGTERM: a clean stop, the audit store flushed on the volume
    c.podman("stop", "--time", "30", ctr, timeout=120)
    code = c.inspect(ctr, "{{.State.ExitCode}}")
    logs = c.podman("logs", ctr, check=False)
    t.check(code == "0", "exit code %s after podman stop:\n%s" % (code, logs.stderr[-2000:]))
    t.check('"signal","detail":"SIGTERM' in logs.stderr.replace(" ", "") or
            "SIGTERM" in logs.stderr, "no SIGTERM stop line")
    t.check_absent({"container log": logs.stdout + logs.stderr}, [SECRET])
finally:
    c.remove(ctr)
    up.stop()
routes = t.audit_rows(type("V", (), {"state": state})(), "routes")
blocked = t.audit_rows(type("V", (), {"state": state})(), "blocked")
t.check(any(r.get("host") == "api.example.test" and r.get("route") == "direct" for r in routes),
        "audit routes: %r" % routes)
t.check(any(r.get("host") == "blocked.example.test" for r in blocked), "audit blocked: %r" %
        blocked)
t.log("image size: %.1f MB; build %.1f s; audit rows: %d routes, %d blocked" %
      (size, build_secs, len(routes), len(blocked)))
