#!/usr/bin/env python3
"""deploy/kubernetes/sidecar-catchall.yaml under `podman kube play` (SPEC §9, §12, §13): the init
container `nft` installs `vaultgate nft --where sandbox --exempt-uid 65532 ... --apply` in the
pod's network namespace before the others start; then, from the sandbox container (uid 1000):
any address on 443 goes to vaultgate (the upstream gets the secret injected over vaultgate's own,
exempt connection), DNS to any resolver address is answered by vaultgate with 127.0.0.1, a
blocked host gets 403, and a connection to another port fails while vaultgate's uid reaches it;
UDP 443 is refused. The same pod whose init container lacks NET_ADMIN does not start: `nft`
exits 4 with nft's reason and neither vaultgate nor the sandbox runs. The time from `kube play`
to /readyz 200 is logged.

The test plays an adapted copy of the manifest; 1, 2, 5 and 6 are test_kube_default's, for the
same reasons (docs/operations.md lists them all):
1. the images are the fixture's (localhost/vaultgate:test, and the tools image with curl and
   python3 as the sandbox, which idles until the test runs its clients);
2. the Secret volume becomes a hostPath directory laid out as the kubelet lays out a Secret
   volume (vault.json -> ..data/vault.json), the file as the kubelet makes it under fsGroup:
   owned by root, group 65532, mode 0440 (the init container reads it as root with no
   capability but NET_ADMIN, vaultgate by its group); Podman 4.3 maps Secret volumes onto its own
   secrets and honours neither defaultMode nor fsGroup, so the Secret document is left out;
3. dnsConfig: Podman 4.3 ignores it under `--network none` (the containers get the host's
   resolv.conf), so the copy mounts a resolv.conf naming only 127.0.0.1 at the sandbox's
   /etc/resolv.conf - what dnsPolicy None with nameservers [127.0.0.1] gives in Kubernetes;
4. the network: the pod is played with `--network none` (loopback only, never Podman's bridge),
   and once it runs the test gives its namespace what CNI gives a pod - a veth to a namespace the
   test creates, with a default route - holding the upstream for api.example.test on
   192.0.2.80:443 (a test CA's certificate), a decoy listener on 192.0.2.80:8443 and a decoy
   resolver on 198.51.100.7:53. vaultgate gets `--resolve api.example.test:443:192.0.2.80
   --upstream-ca ...` (its --dns-server names a cluster DNS service that is not there);
5. `ports` goes (Podman maps ports only on a bridge or slirp4netns network); Podman 4.3 does not
   act on readinessProbe, so the test asks /readyz itself (`vaultgate health --ready`);
6. the emptyDir volumes become hostPath directories owned by 65532: Podman 4.3 creates them
   owned by root and closed to others (Kubernetes makes them world-writable);
7. `restartPolicy: OnFailure` (Kubernetes' default is Always): Podman 4.3 applies the pod's
   restart policy to init containers too, so under Always it starts the `nft` container again
   as soon as it exits 0, then fails to remove that "once" init container because it runs, and
   kube play fails. Kubernetes runs a successful init container once; a failing one is retried
   under either policy, and the pod's other containers never start."""
import copy
import ctypes
import json
import os
import re
import subprocess
import time

import container as c
import decoydns
import vgtest as t
import yaml

SECRET = "sk-canary-POD-CATCHALL-2121"
UPSTREAM = "192.0.2.80"
DECOY_PORT = 8443
RESOLVER = "198.51.100.7"
ELSEWHERE = "203.0.113.9"
POD_ADDR, OUT_ADDR = "10.232.0.2", "10.232.0.1"
VETH = "vkc%d" % (os.getpid() % 100000)

# python3-minimal has socket and ssl: a TCP connect, a UDP send, and one DNS A query by hand
CONNECT = """import socket, sys
s = socket.socket()
s.settimeout(3)
try:
    s.connect((sys.argv[1], int(sys.argv[2])))
    print("connected")
except OSError as e:
    print("failed", type(e).__name__)
"""
UDP_SEND = """import errno, socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    s.sendto(b"\\x00quic-initial", (sys.argv[1], int(sys.argv[2])))
    print("sent")
except OSError as e:
    print("refused", errno.errorcode.get(e.errno, e.errno))
"""
DNS_A = """import socket, struct, sys
name = sys.argv[2]
q = struct.pack(">HHHHHH", 0x2121, 0x0100, 1, 0, 0, 0) + b"".join(
    bytes([len(p)]) + p.encode() for p in name.split(".")) + b"\\0" + struct.pack(">HH", 1, 1)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(5)
s.sendto(q, (sys.argv[1], 53))
r, peer = s.recvfrom(4096)
an = struct.unpack(">H", r[6:8])[0]
print(peer[0], r[3] & 15, an, socket.inet_ntoa(r[-4:]) if an else "-")
"""
GAI = ("import socket; print(sorted({a[4][0] for a in socket.getaddrinfo('any.name.test', 443, "
       "socket.AF_INET)}))")

CLONE_NEWNET = 0x40000000
libc = ctypes.CDLL(None, use_errno=True)


def setns(fd):
    if libc.setns(fd, CLONE_NEWNET) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def sh(*args, check=True):
    return subprocess.run(args, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


img, _ = c.vaultgate_image()
tools = c.tools_image()
d = t.tmpdir()
os.chmod(d, 0o755)
certs = t.make_certs(d, ["api.example.test"])
with open(os.path.join(t.SRC, "deploy", "kubernetes", "sidecar-catchall.yaml")) as f:
    docs = [x for x in yaml.safe_load_all(f) if x]
secret = next(x for x in docs if x["kind"] == "Secret")
pod = copy.deepcopy(next(x for x in docs if x["kind"] == "Pod"))
spec = pod["spec"]
init = spec["initContainers"][0]
vg = next(x for x in spec["containers"] if x["name"] == "vaultgate")
sandbox = next(x for x in spec["containers"] if x["name"] == "sandbox")

# -- what the manifest promises, before adapting it ------------------------------------------
t.check("hostAliases" not in spec, "a catch-all pod has no hostAliases")
t.check(spec["dnsPolicy"] == "None" and spec["dnsConfig"] == {"nameservers": ["127.0.0.1"]},
        "dns: %r %r" % (spec.get("dnsPolicy"), spec.get("dnsConfig")))
t.check(init["name"] == "nft" and init["command"][:2] == ["vaultgate", "nft"], "init %r" % init)
cmd = init["command"]
for a, v in (("--where", "sandbox"), ("--exempt-uid", "65532"), ("--proxy-ip", "127.0.0.1"),
             ("--https-port", "443"), ("--http-port", "80"), ("--dns-redirect", "53"),
             ("--vault", "/etc/vaultgate/vault.json")):
    t.check(a in cmd and cmd[cmd.index(a) + 1] == v, "the init command lacks %s %s" % (a, v))
t.check("--apply" in cmd, "the init command does not --apply")
t.check(init["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_ADMIN"]} and
        init["securityContext"]["runAsUser"] == 0, "init securityContext %r"
        % init["securityContext"])
t.check(vg["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}
        and vg["securityContext"]["runAsUser"] == 65532, "vaultgate securityContext")
for a, v in (("--listen-dns", "127.0.0.1:53"), ("--listen-https", "127.0.0.1:443"),
             ("--listen-http", "127.0.0.1:80"), ("--trust-out", "/run/vaultgate-trust")):
    t.check(a in vg["args"] and vg["args"][vg["args"].index(a) + 1] == v, "vaultgate lacks " + a)
t.check(sandbox["securityContext"]["runAsUser"] not in (0, 65532) and
        sandbox["securityContext"]["capabilities"] == {"drop": ["ALL"]} and
        sandbox["securityContext"]["allowPrivilegeEscalation"] is False,
        "the sandbox could become the exempt uid: %r" % sandbox["securityContext"])
vol = next(v for v in spec["volumes"] if v["name"] == "vault")
t.check(vol["secret"]["defaultMode"] == 0o400, "defaultMode %r" % vol["secret"]["defaultMode"])
vault = json.loads(secret["stringData"]["vault.json"])
t.check(vault["host_policy"]["default"] == "block", "the manifest's vault is not catch-all")
vault["secrets"]["API_KEY"]["value"] = SECRET

# 2. the Secret volume, as the kubelet lays it out under fsGroup 65532
sec = os.path.join(d, "secret")
gen = os.path.join(sec, "..2026_12_02_00_00_00.0001")
os.makedirs(gen)
with open(os.path.join(gen, "vault.json"), "w") as f:
    json.dump(vault, f)
os.chown(os.path.join(gen, "vault.json"), 0, 65532)
os.chmod(os.path.join(gen, "vault.json"), 0o440)
os.symlink(os.path.basename(gen), os.path.join(sec, "..data"))
os.symlink("..data/vault.json", os.path.join(sec, "vault.json"))
for p in (sec, gen):
    os.chmod(p, 0o755)
vol.pop("secret")
vol["hostPath"] = {"path": sec, "type": "Directory"}
# 3. dnsConfig as the sandbox's resolv.conf
resolv = os.path.join(d, "resolv.conf")
with open(resolv, "w") as f:
    f.write("".join("nameserver %s\n" % n for n in spec["dnsConfig"]["nameservers"]) +
            "options attempts:1 timeout:5\n")
os.chmod(resolv, 0o644)
spec["volumes"].append({"name": "resolv", "hostPath": {"path": resolv, "type": "File"}})
sandbox["volumeMounts"].append({"name": "resolv", "mountPath": "/etc/resolv.conf",
                                "readOnly": True})
# 6. emptyDir: hostPath directories owned by 65532
for v in spec["volumes"]:
    if "emptyDir" in v:
        p = os.path.join(d, "emptydir-" + v["name"])
        os.makedirs(p)
        os.chown(p, 65532, 65532)
        os.chmod(p, 0o755)
        v.pop("emptyDir")
        v["hostPath"] = {"path": p, "type": "Directory"}
# 7. an init container that exited 0 is not started again
spec["restartPolicy"] = "OnFailure"
# 5. no port mappings
vg.pop("ports", None)
# 1. images; the sandbox idles
init["image"] = vg["image"] = img
sandbox["image"] = tools
sandbox["command"] = ["python3", "-c", "import time; time.sleep(3600)"]
# 4. vaultgate pinned to the upstream outside the pod
for n in ("cert", "key", "ca"):
    os.chmod(certs[n], 0o644)
spec["volumes"].append({"name": "certs", "hostPath": {"path": d, "type": "Directory"}})
vg["args"] += ["--resolve", "api.example.test:443:" + UPSTREAM, "--upstream-ca",
               "/certs/" + os.path.basename(certs["ca"])]
vg["volumeMounts"].append({"name": "certs", "mountPath": "/certs", "readOnly": True})


def write_pod(p, name):
    p["metadata"]["name"] = name
    path = os.path.join(d, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(p, f, sort_keys=False)
    return path


name = "vgtest-kubeca-%d" % os.getpid()
play = write_pod(pod, name)
# the same pod whose init container cannot install the ruleset
bad = copy.deepcopy(pod)
bad["spec"]["initContainers"][0]["securityContext"]["capabilities"] = {"drop": ["ALL"]}
bad_name = name + "-nocap"
bad_play = write_pod(bad, bad_name)

out_ns = "vgkube-out-%d" % os.getpid()
host_ns = os.open("/proc/self/ns/net", os.O_RDONLY)
up = decoy = resolver = None
for n in (name, bad_name):
    c.podman("pod", "rm", "--force", "--ignore", n, check=False)
try:
    # -- a ruleset that cannot be installed keeps the pod from starting -------------------------
    p = c.podman("kube", "play", "--network", "none", bad_play, check=False, timeout=300)
    init_name = bad_name + "-nft"
    init_log = c.podman("logs", init_name, check=False)
    t.check(p.returncode != 0 and
            re.search(r"init container \w+ exited with code 4\b", p.stderr) is not None,
            "kube play with an init container lacking NET_ADMIN: exit %d %s\n%s"
            % (p.returncode, p.stderr[-1000:], init_log.stderr[-1000:]))
    # under restartPolicy Always a failed init container is started again (the kubelet backs
    # off, Podman does not): each attempt says the same one line
    attempts = [ln for ln in init_log.stderr.split("\n") if ln]
    t.check(set(attempts) == {"vaultgate nft: the ruleset is not installed: nft -f -: netlink: "
                              "Error: cache initialization failed: Operation not permitted"},
            "not one line with nft's reason: %r" % init_log.stderr[-500:])
    for ctr in ("vaultgate", "sandbox"):
        st = c.podman("inspect", "--format", "{{.State.Status}}", bad_name + "-" + ctr,
                      check=False).stdout.strip()
        t.check(st != "running", "the %s container runs although the ruleset failed" % ctr)
    t.log("without NET_ADMIN: kube play exit %d (%s), the init container's line: %s"
          % (p.returncode, p.stderr.strip().split("\n")[-1], attempts[0]))
    c.podman("pod", "rm", "--force", "--ignore", bad_name, check=False, timeout=120)

    # -- the pod ----------------------------------------------------------------------------------
    t0 = time.monotonic()
    c.podman("kube", "play", "--network", "none", play, timeout=300)

    def ready():
        return c.podman("exec", name + "-vaultgate", "vaultgate", "health", "--ready", "--admin",
                        "127.0.0.1:9090", check=False).returncode == 0
    t.check(t.wait_for(ready, timeout=60, step=0.1), "never ready:\n" +
            c.podman("logs", name + "-vaultgate", check=False).stderr[-3000:])
    t_ready = time.monotonic() - t0
    t.log("time from kube play to /readyz 200: %.2f s" % t_ready)

    # 4. the pod's interface, as CNI would give it, to a namespace of the test's own
    pid = c.inspect(c.podman("pod", "inspect", "--format", "{{.InfraContainerID}}",
                             name).stdout.strip(), "{{.State.Pid}}")
    podns = ["nsenter", "-t", pid, "-n"]
    # kube play went on, so `nft` exited 0 (Podman then removes a "once" init container): the
    # table is in the pod's namespace, vaultgate's uid exempt in both chains
    table = sh(*podns, "nft", "list", "table", "inet", "vaultgate").stdout.decode()
    t.check(table.count("meta skuid 65532 counter") == 2 and
            "tcp dport 443 counter packets 0 bytes 0 dnat ip to 127.0.0.1:443" in table,
            "the pod's ruleset:\n" + table)
    sh("ip", "netns", "add", out_ns)
    sh("ip", "link", "add", VETH, "type", "veth", "peer", "name",
       "eth0", "netns", pid)
    sh("ip", "link", "set", VETH, "netns", out_ns)
    sh("ip", "-n", out_ns, "addr", "add", OUT_ADDR + "/30", "dev", VETH)
    for a in (UPSTREAM, RESOLVER):
        sh("ip", "-n", out_ns, "addr", "add", a + "/32", "dev", "lo")
    sh("ip", "-n", out_ns, "link", "set", "lo", "up")
    sh("ip", "-n", out_ns, "link", "set", VETH, "up")
    sh(*podns, "ip", "addr", "add", POD_ADDR + "/30", "dev", "eth0")
    sh(*podns, "ip", "link", "set", "eth0", "up")
    sh(*podns, "ip", "route", "add", "default", "via", OUT_ADDR)
    fd = os.open("/var/run/netns/" + out_ns, os.O_RDONLY)
    setns(fd)
    os.close(fd)
    try:
        up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler, addr=UPSTREAM)
        decoy = t.Witness(UPSTREAM, DECOY_PORT)
        resolver = decoydns.DecoyResolver([RESOLVER])
    finally:
        setns(host_ns)

    def in_sandbox(*args):
        p = c.podman("exec", name + "-sandbox", *args, check=False, timeout=120)
        return p.stdout.strip(), p.stderr

    def curl(url, *extra):
        return in_sandbox("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{remote_ip}",
                          "--max-time", "20", "-H", "Authorization: Bearer placeholder",
                          *extra, url)

    t.check(in_sandbox("id", "-u")[0] == "1000", "the sandbox does not run as uid 1000")
    # vaultgate's own uid reaches the decoy port: the path is there, and exempt
    r = sh(*podns, "setpriv", "--reuid", "65532", "--regid", "65532", "--clear-groups", "python3",
           "-c", CONNECT, UPSTREAM, str(DECOY_PORT), check=False)
    t.check(r.stdout.decode().strip() == "connected", "uid 65532 cannot reach %s:%d: %r"
            % (UPSTREAM, DECOY_PORT, r.stdout))
    t.check(t.wait_for(lambda: decoy.accepts == 1), "the decoy port saw no connection")

    # any address on 443 (by name through vaultgate's DNS, the upstream's own, any other)
    got, err = curl("https://api.example.test/v1/by-name")
    t.check(got == "200 127.0.0.1", "curl by name: %r %s" % (got, err[-500:]))
    for i, addr in enumerate((UPSTREAM, ELSEWHERE)):
        got, err = curl("https://api.example.test/v1/any-%d" % i, "--resolve",
                        "api.example.test:443:" + addr)
        t.check(got == "200 " + addr, "curl to %s:443: %r %s" % (addr, got, err[-500:]))
    seen = up.all_bytes()
    for path in (b"/v1/by-name", b"/v1/any-0", b"/v1/any-1"):
        head = seen[seen.find(b"GET " + path):].split(b"\r\n\r\n")[0]
        t.check(head.startswith(b"GET " + path) and
                head.count(("Authorization: Bearer " + SECRET).encode()) == 1,
                "%s did not reach the upstream injected" % path.decode())
    t.check(b"placeholder" not in seen, "a request reached the upstream around vaultgate")

    # DNS: any resolver address is answered by vaultgate, the C library's resolver too
    got, err = in_sandbox("python3", "-c", DNS_A, RESOLVER, "anything.example.test")
    t.check(got == "%s 0 1 127.0.0.1" % RESOLVER, "DNS to %s: %r %s" % (RESOLVER, got, err))
    got, err = in_sandbox("python3", "-c", GAI)
    t.check(got == "['127.0.0.1']", "getaddrinfo: %r %s" % (got, err))
    t.check(resolver.seen() == 0, "the decoy resolver saw the sandbox's query")

    # a blocked host: 403 from vaultgate, nothing at the upstream
    got, err = curl("https://blocked.example.test/v1/blocked", "--resolve",
                    "blocked.example.test:443:" + UPSTREAM)
    t.check(got == "403 " + UPSTREAM, "blocked host: %r %s" % (got, err[-500:]))
    t.check(b"/v1/blocked" not in up.all_bytes(), "the blocked host reached the upstream")

    # not 80/443: TCP to the decoy port fails for the sandbox, UDP 443 is refused
    got, err = in_sandbox("python3", "-c", CONNECT, UPSTREAM, str(DECOY_PORT))
    t.check(got.startswith("failed"), "the sandbox reached %s:%d: %r" % (UPSTREAM, DECOY_PORT,
                                                                       got))
    t.check(decoy.accepts == 1, "the decoy port saw the sandbox's connection")
    got, err = in_sandbox("python3", "-c", UDP_SEND, UPSTREAM, "443")
    t.check(got == "refused EPERM", "UDP 443: %r %s" % (got, err))

    # trust.env and the manifest's environment say the same
    env = in_sandbox("cat", "/run/vaultgate-trust/trust.env")[0]
    want = set()
    for e in sandbox["env"]:
        want.add("export %s=%s" % (e["name"], e["value"]))
        want.add("export %s='%s'" % (e["name"], e["value"]))
    lines = [ln for ln in env.splitlines() if ln.startswith("export ")]
    t.check(lines and all(ln in want for ln in lines) and len(lines) == len(sandbox["env"]),
            "the manifest's environment differs from trust.env:\n%s" % env)
    logs = c.podman("logs", name + "-vaultgate", check=False)
    t.check_absent({"log": logs.stdout + logs.stderr, "init log": init_log.stderr}, [SECRET])
finally:
    setns(host_ns)
    for n in (name, bad_name):
        c.podman("pod", "rm", "--force", "--ignore", n, check=False, timeout=120)
    for x in (up, decoy, resolver):
        if x is not None:
            (x.close if hasattr(x, "close") else x.stop)()
    sh("ip", "netns", "del", out_ns, check=False)
t.log("catch-all pod ready in %.2f s; 443 and DNS on vaultgate, the rest refused" % t_ready)
