#!/usr/bin/env python3
"""deploy/kubernetes/sidecar-default.yaml under `podman kube play` (SPEC §13): the sandbox container
resolves the designated name through the pod's hostAliases to 127.0.0.1, where the vaultgate
sidecar (uid 65532, read-only root, only NET_BIND_SERVICE) listens on :443, trusts the run
through the files vaultgate wrote into the shared emptyDir (the manifest's env, as trust.env
says), and curl gets an answer from the upstream with the secret injected; a blocked name gets
403; /readyz turns 200 (the time from `kube play` to ready is logged).

The pod runs with `--network none`: its containers share a network namespace with loopback
only, so all traffic stays on the pod's own loopback. The test plays an adapted copy of the
manifest, because Debian 12's Podman 4.3 ignores or mishandles a few fields (docs/operations.md
lists the same):
1. the images are the ones the fixture built (localhost/vaultgate:test, and the tools image with
   curl and python3 as the sandbox);
2. the Secret volume becomes a hostPath directory laid out as the kubelet lays out a Secret
   volume (vault.json -> ..data/vault.json, ..data -> a timestamped directory), the file owned
   by 65532 and mode 0400: Podman 4.3 maps Secret volumes onto its own secrets and does not
   honour defaultMode or fsGroup, so the Secret document is left out of the copy;
3. hostAliases: Podman ignores them under `--network none` (and refuses them with `--no-hosts`),
   so the copy moves them into a hosts file mounted at the sandbox's /etc/hosts and plays with
   `--no-hosts`;
4. the upstream: a third container (python3's TLS server on 127.0.0.3:443, in the pod) and the
   vaultgate arguments `--resolve api.example.test:443:127.0.0.3 --upstream-ca ...` pinning the
   name to it, with the test CA on a hostPath volume;
5. `ports` (documentation of the admin port) is dropped: Podman allows port mappings only with a
   bridge or slirp4netns network; the probes stay, but Podman 4.3 does not act on
   readinessProbe: the test asks /readyz itself (`vaultgate health --ready` in the sidecar, the
   probe's own question);
6. the emptyDir volumes become hostPath directories owned by 65532: Podman 4.3 creates an
   emptyDir owned by root and not writable by others (Kubernetes makes it world-writable)."""
import copy
import json
import os
import time
import container as c
import vgtest as t
import yaml

SECRET = "sk-canary-POD-9090"
# python3-minimal has socket and ssl, not http.server or json: one request per connection, the
# head recorded as received (tab-separated host and authorization per line)
STUB = r'''
import socket, ssl, sys
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(sys.argv[1], sys.argv[2])
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.3", 443))
srv.listen(16)
while True:
    raw, _ = srv.accept()
    try:
        c = ctx.wrap_socket(raw, server_side=True)
        head = b""
        while b"\r\n\r\n" not in head:
            b = c.recv(4096)
            if not b:
                break
            head += b
        f = {}
        for ln in head.decode("latin-1").split("\r\n")[1:]:
            if ":" in ln:
                k, v = ln.split(":", 1)
                f[k.strip().lower()] = v.strip()
        with open("/results/requests.tsv", "a") as out:
            out.write("%s\t%s\n" % (f.get("host", ""), f.get("authorization", "")))
        body = b"hello from upstream\n"
        c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                  % len(body) + body)
        c.close()
    except (OSError, ssl.SSLError):
        raw.close()
'''

img, _ = c.vaultgate_image()
tools = c.tools_image()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
with open(os.path.join(t.SRC, "deploy", "kubernetes", "sidecar-default.yaml")) as f:
    docs = [x for x in yaml.safe_load_all(f) if x]
secret = next(x for x in docs if x["kind"] == "Secret")
pod = copy.deepcopy(next(x for x in docs if x["kind"] == "Pod"))
spec = pod["spec"]
vg = next(x for x in spec["containers"] if x["name"] == "vaultgate")
sandbox = next(x for x in spec["containers"] if x["name"] == "sandbox")

# what the manifest promises, before adapting it
t.check(vg["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        "capabilities %r" % vg["securityContext"]["capabilities"])
t.check(vg["securityContext"]["runAsUser"] == 65532 and
        vg["securityContext"]["readOnlyRootFilesystem"] is True, "securityContext")
for a in ("--vault-watch", "--trust-out", "--admin-allow-remote"):
    t.check(a in vg["args"], "args lack " + a)
t.check(vg["readinessProbe"]["httpGet"]["path"] == "/readyz", "readiness probe")
vol = next(v for v in spec["volumes"] if v["name"] == "vault")
t.check(vol["secret"]["defaultMode"] == 0o400, "defaultMode %r" % vol["secret"]["defaultMode"])
aliases = spec["hostAliases"]
names = [n for a in aliases for n in a["hostnames"]]
t.check(all(a["ip"] == "127.0.0.1" for a in aliases) and "api.example.test" in names, "aliases")
vault = json.loads(secret["stringData"]["vault.json"])
vault["secrets"]["API_KEY"]["value"] = SECRET

# 2. the Secret volume: a directory as the kubelet lays it out
sec = os.path.join(d, "secret")
gen = os.path.join(sec, "..2026_12_02_00_00_00.0001")
os.makedirs(gen)
with open(os.path.join(gen, "vault.json"), "w") as f:
    json.dump(vault, f)
os.chmod(os.path.join(gen, "vault.json"), 0o400)
os.chown(os.path.join(gen, "vault.json"), 65532, 65532)
os.symlink(os.path.basename(gen), os.path.join(sec, "..data"))
os.symlink("..data/vault.json", os.path.join(sec, "vault.json"))
for p in (sec, gen):
    os.chmod(p, 0o755)
vol.pop("secret")
vol["hostPath"] = {"path": sec, "type": "Directory"}
# 3. hostAliases as the sandbox's /etc/hosts
hosts = os.path.join(d, "hosts")
with open(hosts, "w") as f:
    f.write("127.0.0.1 localhost\n" + "".join("%s %s\n" % (a["ip"], " ".join(a["hostnames"]))
                                              for a in aliases))
os.chmod(hosts, 0o644)
spec["volumes"].append({"name": "hosts", "hostPath": {"path": hosts, "type": "File"}})
del spec["hostAliases"]  # Podman refuses them together with --no-hosts
sandbox["volumeMounts"].append({"name": "hosts", "mountPath": "/etc/hosts", "readOnly": True})
# 6. emptyDir: Podman 4.3 makes it a volume owned by root (Kubernetes: world-writable), which
# uid 65532 cannot write: a hostPath directory owned by 65532 instead
for v in spec["volumes"]:
    if "emptyDir" in v:
        p = os.path.join(d, "emptydir-" + v["name"])
        os.makedirs(p)
        os.chown(p, 65532, 65532)
        os.chmod(p, 0o755)
        v.pop("emptyDir")
        v["hostPath"] = {"path": p, "type": "Directory"}
# 5. no port mappings: Podman accepts them only with a bridge or slirp4netns network
vg.pop("ports", None)
# 1. images; the sandbox idles until the test runs its client
vg["image"] = img
sandbox["image"] = tools
sandbox["command"] = ["python3", "-c", "import time; time.sleep(3600)"]
# 4. the upstream in the pod, and vaultgate pinned to it
results = os.path.join(d, "results")
os.makedirs(results)
os.chmod(results, 0o777)
with open(os.path.join(d, "stub.py"), "w") as f:
    f.write(STUB)
spec["volumes"] += [{"name": "certs", "hostPath": {"path": d, "type": "Directory"}},
                    {"name": "results", "hostPath": {"path": results, "type": "Directory"}}]
for n in ("cert", "key", "ca"):
    os.chmod(certs[n], 0o644)
spec["containers"].append({
    "name": "upstream", "image": tools,
    "command": ["python3", "/certs/stub.py", "/certs/" + os.path.basename(certs["cert"]),
                "/certs/" + os.path.basename(certs["key"])],
    "volumeMounts": [{"name": "certs", "mountPath": "/certs", "readOnly": True},
                     {"name": "results", "mountPath": "/results"}]})
vg["args"] += ["--resolve", "api.example.test:443:127.0.0.3", "--upstream-ca",
               "/certs/" + os.path.basename(certs["ca"])]
vg["volumeMounts"].append({"name": "certs", "mountPath": "/certs", "readOnly": True})
os.chmod(d, 0o755)

name = "vgtest-kube-%d" % os.getpid()
pod["metadata"]["name"] = name
play = os.path.join(d, "pod.yaml")
with open(play, "w") as f:
    yaml.safe_dump(pod, f, sort_keys=False)
c.remove(name)
c.podman("pod", "rm", "--force", "--ignore", name, check=False)
try:
    t0 = time.monotonic()
    c.podman("kube", "play", "--network", "none", "--no-hosts", play, timeout=300)

    def ready():
        p = c.podman("exec", name + "-vaultgate", "vaultgate", "health", "--ready", "--admin",
                     "127.0.0.1:9090", check=False)
        return p.returncode == 0
    t.check(t.wait_for(ready, timeout=60, step=0.1), "never ready:\n" +
            c.podman("logs", name + "-vaultgate", check=False).stderr[-3000:])
    t_ready = time.monotonic() - t0
    t.log("time from kube play to /readyz 200: %.2f s" % t_ready)

    def curl(url):
        return c.podman("exec", name + "-sandbox", "curl", "-sS", "--max-time", "20", "-o",
                        "/dev/stderr", "-w", "%{http_code}", url, check=False)
    r = curl("https://api.example.test/v1/models")
    t.check(r.returncode == 0 and r.stdout == "200", "sandbox curl: %d %r %r\n%s\n%s" %
            (r.returncode, r.stdout, r.stderr[-500:],
             c.podman("logs", name + "-upstream", check=False).stderr[-1500:],
             c.podman("logs", name + "-vaultgate", check=False).stderr[-1500:]))
    t.check("hello from upstream" in r.stderr, "body %r" % r.stderr[-300:])
    got = [x.rstrip("\n").split("\t") for x in open(os.path.join(results, "requests.tsv"))]
    t.check(got and got[-1] == ["api.example.test", "Bearer " + SECRET],
            "the upstream got %r" % [g[0] for g in got])
    r = curl("https://blocked.example.test/")
    t.check(r.stdout == "403", "blocked.example.test: %r %r" % (r.stdout, r.stderr[-300:]))
    r = curl("http://api.example.test/plain")  # :80, plain HTTP, by Host
    t.check(r.stdout == "200", "plain HTTP on :80: %r %r" % (r.stdout, r.stderr[-300:]))
    env = c.podman("exec", name + "-sandbox", "cat", "/run/vaultgate-trust/trust.env").stdout
    want = set()
    for e in sandbox["env"]:
        want.add("export %s=%s" % (e["name"], e["value"]))
        want.add("export %s='%s'" % (e["name"], e["value"]))
    lines = [ln for ln in env.splitlines() if ln.startswith("export ")]
    # both ways: every manifest variable is in trust.env, and trust.env has no other
    t.check(lines and all(ln in want for ln in lines) and len(lines) == len(sandbox["env"]),
            "the manifest's environment differs from trust.env:\n%s" % env)
    pid = c.inspect(name + "-vaultgate", "{{.State.Pid}}")
    st = dict(ln.split(":\t", 1) for ln in open("/proc/%s/status" % pid).read().splitlines()
              if ":\t" in ln)
    t.check(st["Uid"].split()[0] == "65532", "Uid %r" % st["Uid"])
    t.check(int(st["CapEff"], 16) == 1 << 10, "CapEff %r: only NET_BIND_SERVICE" % st["CapEff"])
    logs = c.podman("logs", name + "-vaultgate", check=False)
    t.check_absent({"log": logs.stdout + logs.stderr}, [SECRET])
finally:
    c.podman("pod", "rm", "--force", "--ignore", name, check=False, timeout=120)
t.log("pod ready in %.2f s" % t_ready)
