"""The end-to-end checks of DNS held by the gateway (SPEC §12), shared by the gateway and the
sandbox ruleset cases: vaultgate (catchall.start_gateway, with --listen-dns on DNS_PORT) in the
gateway namespace, a decoy resolver there on every address the sandbox will name, and - once a
ruleset with --dns-redirect is in place - real clients in the sandbox: dig, Python's
getaddrinfo and curl through a resolv.conf bind-mounted in a mount namespace, and the probe.

The resolver addresses are documentation addresses and the one the host's own resolv.conf names;
each exists only on the gateway namespace's loopback (for the decoy), so nothing is sent to any
address outside the namespaces the case made."""
import ipaddress
import os
import re
import subprocess

import decoydns
import netns
import vgtest as t

DNS_PORT = 5353
ALLOWED = "allowed.example.test"
BLOCKED = "blocked.example.test"


def resolver_addrs():
    """192.0.2.53, 198.51.100.7 and the host's first IPv4 nameserver when it is not loopback."""
    addrs = ["192.0.2.53", "198.51.100.7"]
    try:
        with open("/etc/resolv.conf") as f:
            for line in f:
                w = line.split()
                if len(w) >= 2 and w[0] == "nameserver":
                    a = ipaddress.ip_address(w[1].split("%")[0])
                    if a.version == 4 and not a.is_loopback and str(a) not in addrs:
                        addrs.append(str(a))
                    break
    except (OSError, ValueError):
        pass
    return addrs


def start_decoy(topo, addrs):
    """The decoy resolver on addrs (added to the gateway's loopback); the calling thread must be
    in the gateway namespace. Checks that the sandbox reaches it while no ruleset is in place,
    so that its silence later means something, then returns it with its counts at zero."""
    for a in addrs:
        topo.gw("ip", "addr", "add", a + "/32", "dev", "lo")
    decoy = decoydns.DecoyResolver(addrs)
    st, answers, out = dig(topo, addrs[0], "before.rules.test")
    t.check(answers == [decoydns.DECOY_ANSWER], "the decoy is not reachable before the "
            "ruleset, so its silence would prove nothing:\n" + out)
    decoy.udp_packets = decoy.tcp_connections = 0
    return decoy


def dig(topo, server, name, tcp=False):
    """(status, [A records], output) of `dig @server name A` run in the sandbox."""
    args = ["dig", "+tries=1", "+time=5", "@" + server, name, "A"] + (["+tcp"] if tcp else [])
    r = topo.sb(*args, check=False, timeout=30)
    out = r.stdout.decode("utf-8", "replace")
    m = re.search(r"status: (\w+)", out)
    answers = re.findall(r"^%s\.\s+\d+\s+IN\s+A\s+(\S+)$" % re.escape(name), out, re.M)
    return (m.group(1) if m else None), answers, out


def in_sandbox_with_resolver(topo, d, resolver, script):
    """Runs the shell script in the sandbox in a mount namespace of its own, where
    /etc/resolv.conf names only resolver. Returns the CompletedProcess."""
    rc = os.path.join(d, "resolv.conf")
    with open(rc, "w") as f:
        f.write("nameserver %s\noptions attempts:1 timeout:5\n" % resolver)
    os.chmod(rc, 0o644)
    return topo.sb("unshare", "-m", "--", "sh", "-c",
                   'mount --bind "$0" /etc/resolv.conf && ' + script, rc, check=False,
                   timeout=120)


def check_dns_held(topo, vg, up, decoy, secret, addrs):
    """Every check of the DNS path from the sandbox, with the ruleset in place."""
    answer = netns.GATEWAY_ADDR  # the address each query arrived on at vaultgate

    # 1. dig at arbitrary resolver addresses, UDP and TCP: vaultgate answers.
    for i, a in enumerate(addrs):
        for tcp in (False, True):
            name = "any%d.name.test" % i
            st, answers, out = dig(topo, a, name, tcp=tcp)
            t.check(st == "NOERROR" and answers == [answer],
                    "dig @%s %s A%s: want %s from vaultgate:\n%s"
                    % (a, name, " +tcp" if tcp else "", answer, out))
            t.check("SERVER: %s#53" % a in out, "the answer did not come from %s:\n%s" % (a, out))

    # 2. The C library's resolver (getaddrinfo) with a resolv.conf naming an arbitrary address.
    p = in_sandbox_with_resolver(
        topo, vg.d, addrs[1], 'exec python3 -c "import socket; print(sorted({a[4][0] for a in '
        'socket.getaddrinfo(\'py.example.test\', 443, socket.AF_INET)}))"')
    t.check(p.returncode == 0 and p.stdout.decode().strip() == "['%s']" % answer,
            "getaddrinfo through %s: %r %s" % (addrs[1], p.stdout, p.stderr.decode()))

    # 3. Names resolved, then fetched on 443 by curl (its own lookups, through resolv.conf).
    curl = ('curl -sS -o /dev/null -w "%%{http_code} %%{remote_ip}\\n" --max-time 20 '
            '--cacert %s -H "Authorization: Bearer placeholder" ' % vg.ca)
    script = " && ".join(curl + "https://%s/v1/%s" % (h, p)
                         for h, p in (("api.example.test", "dns-rule"), (ALLOWED, "dns-allowed"),
                                      (BLOCKED, "dns-blocked")))
    p = in_sandbox_with_resolver(topo, vg.d, addrs[-1], script)
    got = p.stdout.decode().split("\n")
    t.check(p.returncode == 0 and got[:3] == ["200 " + answer, "200 " + answer, "403 " + answer],
            "curl after a lookup (rule, allowed, blocked host): %r %s"
            % (got, p.stderr.decode()))
    seen = up.all_bytes()
    rule = seen[seen.find(b"GET /v1/dns-rule"):]
    t.check(b"GET /v1/dns-rule" in seen and
            rule.split(b"\r\n\r\n")[0].count(("Authorization: Bearer " + secret).encode()) == 1,
            "the rule host's request did not reach the upstream injected")
    allowed = seen[seen.find(b"GET /v1/dns-allowed"):].split(b"\r\n\r\n")[0]
    t.check(b"GET /v1/dns-allowed" in seen and b"Bearer placeholder" in allowed and
            secret.encode() not in allowed,
            "the allowed host's request was not forwarded as sent: %r" % allowed)
    t.check(b"/v1/dns-blocked" not in seen, "the blocked host's request reached the upstream")

    # 4. The probe with its DNS checks passes from the sandbox.
    r = topo.sb(t.VG_BIN, "probe", "--dns", "--timeout", "5", "--ca", vg.ca, check=False)
    t.check(r.returncode == 0, "probe --dns: %s %s" % (r.stdout.decode(), r.stderr.decode()))

    # 5. The decoy saw nothing; vaultgate counted the queries; no name in its log.
    t.check(decoy.seen() == 0, "the decoy resolver saw %d UDP packets and %d TCP connections"
            % (decoy.udp_packets, decoy.tcp_connections))
    text = t.metrics_text(vg)
    n = t.metric_value(text, 'vaultgate_dns_queries_total{type="A",rcode="noerror"}')
    t.check(n is not None and n >= 2 * len(addrs) + 4, "A queries counted: %r" % n)
    log = vg.stderr()
    t.check(secret not in log, "the secret appeared in the log")
    t.check("any0.name.test" not in log and "py.example.test" not in log,
            "a looked-up name appeared in the log")
