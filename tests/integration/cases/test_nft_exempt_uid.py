#!/usr/bin/env python3
"""`vaultgate nft --where sandbox --exempt-uid` (SPEC §13): vaultgate as a sidecar, sharing the
sandbox's network namespace - the shape of a pod.

Two namespaces of this case's own (netns.Topology): the "pod" (vaultgate and the sandbox) and,
behind a veth, an "outside" one holding a fake upstream for api.example.test on the
documentation address 192.0.2.80:443 (a certificate from a CA the sandbox does not trust), a
decoy listener on 192.0.2.80:8443 and a decoy resolver on 198.51.100.7:53. Before any ruleset,
the sandbox user reaches all three (so their silence later means something). Then, as the pod
does: the ruleset is applied (`--exempt-uid nobody --proxy-ip 127.0.0.1 --https-port 443
--http-port 80 --dns-redirect 53 --apply`, the name looked up to 65534), and vaultgate starts in
the pod as root, binds 127.0.0.1:443, :80 and --listen-dns 127.0.0.1:53, and drops to `--user
nobody`, so its upstream sockets belong to the exempt uid. As another uid (4321, no account,
no capabilities) in the same namespace:
- curl to api.example.test on 443 at any address (the upstream's own 192.0.2.80, an unrouted
  203.0.113.9) lands on vaultgate: it verifies with the run's CA only, and the upstream gets the
  request with the secret injected - over vaultgate's own connection, which the exempt rule let
  out (its counter counted it), not DNATed back into vaultgate (one request event per request);
- dig at an arbitrary resolver address is answered by vaultgate (127.0.0.1, the address the
  query arrived on), over UDP and TCP; curl through a resolv.conf naming that resolver fetches
  the rule host; the decoy resolver sees nothing;
- a blocked host gets 403 on 443 and on 80, and never reaches the upstream;
- a TCP connection to the upstream's other port fails and the decoy sees nothing, while the
  exempt uid still reaches it; a UDP datagram to 443 is refused at once (EPERM from sendto).
The secret appears in no client output and no log line."""
import json
import os
import pwd
import shutil

import decoydns
import netns
import vgtest as t

t.require_binary()
for tool in ("dig", "curl", "setpriv", "unshare"):
    if not shutil.which(tool):
        t.skip("%s missing (scripts/deps installs it)" % tool)
try:
    nobody = pwd.getpwnam("nobody")
except KeyError:
    t.skip("no user nobody")
try:
    topo = netns.Topology()
except netns.Unavailable as e:
    t.skip(str(e))

SECRET = "sk-canary-SECRET-exempt-uid-0021"
UPSTREAM = "192.0.2.80"   # the upstream's address, outside the pod
DECOY_PORT = 8443         # another port on it, where nothing from the sandbox may arrive
RESOLVER = "198.51.100.7" # a resolver address the sandbox names; a decoy answers there
ELSEWHERE = "203.0.113.9" # an address nothing holds
SB_UID = "4321"           # the sandbox's processes: a uid no account has

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


def as_user(uid, *args, timeout=60):
    """Runs args in the pod's namespace as uid, with no groups and no capabilities."""
    return topo.sb("setpriv", "--reuid", str(uid), "--regid", str(uid), "--clear-groups",
                   "--inh-caps=-all", "--", *args, check=False, timeout=timeout)


def tcp(uid, port):
    return as_user(uid, "python3", "-c", CONNECT, UPSTREAM, str(port)).stdout.decode().strip()


def dig(server, name, tcp_=False):
    r = as_user(SB_UID, "dig", "+tries=1", "+time=5", "@" + server, name, "A",
                *(["+tcp"] if tcp_ else []))
    out = r.stdout.decode("utf-8", "replace")
    answers = [l.split()[-1] for l in out.splitlines()
               if l.startswith(name + ".") and "\tA\t" in l.replace(" ", "\t")]
    return answers, out


def curl(url, resolve=None, resolver=None):
    """curl as the sandbox user: 'code remote_ip' and stderr. With resolver, in a mount
    namespace whose /etc/resolv.conf names only that address."""
    args = ["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code} %{remote_ip}", "--max-time",
            "20", "--cacert", ca, "-H", "Authorization: Bearer placeholder"]
    if resolve:
        args += ["--resolve", resolve]
    cmd = ["setpriv", "--reuid", SB_UID, "--regid", SB_UID, "--clear-groups",
           "--inh-caps=-all", "--"] + args + [url]
    if resolver is None:
        r = topo.sb(*cmd, check=False, timeout=60)
    else:
        rc = os.path.join(d, "resolv.conf")
        with open(rc, "w") as f:
            f.write("nameserver %s\noptions attempts:1 timeout:5\n" % resolver)
        os.chmod(rc, 0o644)
        r = topo.sb("unshare", "-m", "--", "sh", "-c",
                    'mount --bind "$0" /etc/resolv.conf && shift && exec "$@"', rc, "sh", *cmd,
                    check=False, timeout=60)
    return r.stdout.decode().strip(), r.stderr.decode()


def counters():
    """{(chain, rule text): packets} of the rules with a counter, from the pod's table."""
    r = topo.sb("nft", "-j", "list", "table", "inet", "vaultgate")
    out = {}
    for o in json.loads(r.stdout)["nftables"]:
        rule = o.get("rule")
        if not rule:
            if "counter" in o and "name" in o["counter"]:
                out[("named", o["counter"]["name"])] = o["counter"]["packets"]
            continue
        for e in rule["expr"]:
            if "counter" in e and isinstance(e["counter"], dict) and "packets" in e["counter"]:
                key = json.dumps(rule["expr"][0], sort_keys=True)
                out[(rule["chain"], key)] = e["counter"]["packets"]
    return out


def skuid_packets(c, chain):
    for (ch, key), n in c.items():
        if ch == chain and '"skuid"' in key:
            return n
    return None


up = vg = decoy_tcp = None
try:
    d = t.tmpdir()
    os.chmod(d, 0o711)  # nobody (vaultgate) and the sandbox user reach the state dir by name
    # -- outside the pod: the upstream, the decoy port, the decoy resolver ----------------------
    netns.enter(topo.gw_ns)
    for a in (UPSTREAM, RESOLVER):
        topo.gw("ip", "addr", "add", a + "/32", "dev", "lo")
    certs = t.make_certs(d, ["api.example.test"])
    up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler, addr=UPSTREAM)
    decoy_tcp = t.Witness(UPSTREAM, DECOY_PORT)
    decoy_dns = decoydns.DecoyResolver([RESOLVER])

    # -- the pod ----------------------------------------------------------------------------------
    netns.enter(topo.sb_ns)
    t.check(tcp(SB_UID, 443) == "connected" and tcp(SB_UID, DECOY_PORT) == "connected",
            "the sandbox user cannot reach the upstream before the ruleset, so its failing "
            "later would prove nothing")
    answers, out = dig(RESOLVER, "before.rules.test")
    t.check(answers == [decoydns.DECOY_ANSWER], "the decoy resolver is not reachable before the "
            "ruleset:\n" + out)
    t.check(t.wait_for(lambda: decoy_tcp.accepts >= 1), "the decoy port saw no connection")
    decoy_tcp.accepts = 0
    decoy_dns.udp_packets = decoy_dns.tcp_connections = 0

    vault = t.example_vault(run_id="run-exempt-uid", default="block",
                            secrets={"API_KEY": {"value": SECRET}})
    vg = t.Vaultgate(d, vault, pins=["api.example.test:443:" + UPSTREAM],
                     upstream_ca=certs["ca"], http=True,
                     extra=["--listen-dns", "127.0.0.1:53", "--user", "nobody"])
    # The init container's step, before vaultgate starts: the user name is looked up now.
    r = topo.sb(t.VG_BIN, "nft", "--vault", vg.vault_path, "--where", "sandbox", "--exempt-uid",
                "nobody", "--proxy-ip", "127.0.0.1", "--https-port", "443", "--http-port", "80",
                "--dns-redirect", "53", "--apply", check=False)
    t.check(r.returncode == 0, "nft --exempt-uid --apply: rc=%d %s"
            % (r.returncode, r.stderr.decode()))
    listed = topo.sb("nft", "list", "chain", "inet", "vaultgate", "output_nat").stdout.decode()
    t.check("meta skuid %d " % nobody.pw_uid in listed, "no exempt rule for uid %d:\n%s"
            % (nobody.pw_uid, listed))

    vg.args[vg.args.index("--listen-https") + 1] = "127.0.0.1:443"
    vg.args[vg.args.index("--listen-http") + 1] = "127.0.0.1:80"
    vg.port, vg.http_port = 443, 80
    vg.start()
    status = [l for l in open("/proc/%d/status" % vg.proc.pid) if l.startswith("Uid:")][0]
    t.check(status.split()[1:] == [str(nobody.pw_uid)] * 4, "vaultgate runs as %r" % status)
    ca = vg.ca

    # 1. Any address on 443 lands on vaultgate; the upstream gets the request injected, over
    #    vaultgate's own (exempt) connection.
    for i, addr in enumerate((UPSTREAM, ELSEWHERE)):
        got, err = curl("https://api.example.test/v1/any-%d" % i,
                        resolve="api.example.test:443:" + addr)
        t.check(got == "200 " + addr, "curl to %s:443: %r %s" % (addr, got, err))
    seen = up.all_bytes()
    for i in range(2):
        head = seen[seen.find(b"GET /v1/any-%d" % i):].split(b"\r\n\r\n")[0]
        t.check(b"GET /v1/any-%d" % i in seen and
                head.count(("Authorization: Bearer " + SECRET).encode()) == 1 and
                b"placeholder" not in head,
                "request %d did not reach the upstream injected: %r" % (i, head[:200]))
    t.check(b"placeholder" not in seen, "a request reached the upstream without vaultgate")
    c = counters()
    t.check((skuid_packets(c, "output_nat") or 0) >= 1,
            "the exempt rule in output_nat counted nothing: %r" % c)
    t.check((skuid_packets(c, "output_filter") or 0) >= 1,
            "the exempt rule in output_filter counted nothing: %r" % c)
    t.wait_for(lambda: len(vg.events("request")) >= 2)  # lines leave once per loop turn
    t.check(len(vg.events("request")) == 2, "vaultgate served %d requests for the 2 sent (its "
            "own upstream connection came back into it?):\n%s"
            % (len(vg.events("request")), vg.stderr()[-2000:]))

    # 2. DNS to any resolver address is answered by vaultgate; a looked-up name is fetched.
    for tcp_ in (False, True):
        answers, out = dig(RESOLVER, "anything.example.test", tcp_)
        t.check(answers == ["127.0.0.1"] and "SERVER: %s#53" % RESOLVER in out,
                "dig @%s%s: want 127.0.0.1 from vaultgate:\n%s"
                % (RESOLVER, " +tcp" if tcp_ else "", out))
    got, err = curl("https://api.example.test/v1/by-name", resolver=RESOLVER)
    t.check(got == "200 127.0.0.1", "curl through resolv.conf: %r %s" % (got, err))
    by_name = up.all_bytes()
    by_name = by_name[by_name.find(b"GET /v1/by-name"):].split(b"\r\n\r\n")[0]
    t.check(by_name.startswith(b"GET /v1/by-name") and
            by_name.count(("Authorization: Bearer " + SECRET).encode()) == 1,
            "the request by name did not reach the upstream injected")
    t.check(decoy_dns.seen() == 0, "the decoy resolver saw %d UDP packets and %d TCP connections"
            % (decoy_dns.udp_packets, decoy_dns.tcp_connections))

    # 3. A blocked host: 403 from vaultgate on 443 and 80, nothing at the upstream.
    got, err = curl("https://blocked.example.test/v1/blocked",
                    resolve="blocked.example.test:443:" + UPSTREAM)
    t.check(got == "403 " + UPSTREAM, "blocked host on 443: %r %s" % (got, err))
    got, err = curl("http://blocked.example.test/v1/blocked-plain",
                    resolve="blocked.example.test:80:" + ELSEWHERE)
    t.check(got == "403 " + ELSEWHERE, "blocked host on 80: %r %s" % (got, err))
    t.check(b"/v1/blocked" not in up.all_bytes(), "the blocked host reached the upstream")

    # 4. Another port fails for the sandbox (dropped, counted), not for the exempt uid; UDP to
    #    443 is refused at once.
    before = counters().get(("named", "dropped_output"), 0)
    got = tcp(SB_UID, DECOY_PORT)
    t.check(got.startswith("failed"), "the sandbox reached %s:%d: %s" % (UPSTREAM, DECOY_PORT,
                                                                         got))
    t.check(decoy_tcp.accepts == 0, "the decoy port saw the sandbox's connection")
    t.check(counters().get(("named", "dropped_output"), 0) > before, "the drop was not counted")
    t.check(tcp(nobody.pw_uid, DECOY_PORT) == "connected",
            "the exempt uid could not reach %s:%d" % (UPSTREAM, DECOY_PORT))
    t.check(t.wait_for(lambda: decoy_tcp.accepts == 1), "the exempt uid's connection was not "
            "accepted at the decoy port")
    r = as_user(SB_UID, "python3", "-c", UDP_SEND, UPSTREAM, "443")
    t.check(r.stdout.decode().strip() == "refused EPERM",
            "UDP to 443: %r %s" % (r.stdout, r.stderr.decode()))
    t.check(counters().get(("named", "rejected_udp"), 0) >= 1, "the UDP refusal was not counted")

    rc = vg.stop()
    t.check(rc == 0, "vaultgate exit %s:\n%s" % (rc, vg.stderr()))
    t.check_absent({"vaultgate's log": vg.stderr(), "the ruleset": listed,
                    "the table": topo.sb("nft", "list", "ruleset").stdout.decode()}, [SECRET])
finally:
    if vg is not None:
        vg.kill()
    for x in (up, decoy_tcp):
        if x is not None:
            x.stop()
    topo.close()
t.log("sidecar ruleset: uid %d left untouched, uid %s's 443/80/DNS on vaultgate, the rest refused"
      % (nobody.pw_uid, SB_UID))
