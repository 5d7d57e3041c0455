#!/usr/bin/env python3
"""The per-run CA against real TLS clients, and `vaultgate trust` end to end.

tests/tools/ca_serve (built from ca/) makes a CA, writes the root certificate, mints a leaf
and serves TLS on a loopback ephemeral port. Then:
- curl, openssl s_client and `openssl verify -x509_strict` accept a leaf inside the name
  constraints (DNS and IP), and curl rejects one for another name than the one served;
- a leaf outside the constraints (minted with --force) is rejected by curl and s_client,
  for an unrelated name and for a subdomain of a listed name;
- `vaultgate trust` writes the bundle (root first, then the system roots), prints the five
  environment lines of SPEC §2 first (test_trust_runtimes covers the others), and curl, Python's ssl, Node and git trust the chain through them.

Exit 0 pass, 77 skip (a tool is missing), anything else fail.
"""
import os
import re
import shlex
import shutil
import socket
import ssl
import stat
import subprocess
import sys
import tempfile

BUILD = os.environ.get("VG_BUILD", "")
VG_BIN = os.environ.get("VG_BIN", "")
CA_SERVE = os.path.join(BUILD, "tests", "tools", "ca_serve")
TMP = os.environ.get("VG_CASE_TMP") or tempfile.mkdtemp(prefix="vg-ca-serve-")
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if k.lower() not in ("https_proxy", "http_proxy", "all_proxy", "no_proxy",
                                  "ssl_cert_file", "ssl_cert_dir", "curl_ca_bundle",
                                  "requests_ca_bundle", "node_extra_ca_certs",
                                  "git_ssl_cainfo")}

failures = []
servers = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what, flush=True)
    if not cond:
        failures.append(what)


def run(args, env=None, inp=None, timeout=30):
    p = subprocess.run(args, input=inp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env or CLEAN_ENV, timeout=timeout)
    return p.returncode, p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")


def serve(name, host, dns=(), ips=(), extra=()):
    root = os.path.join(TMP, name + "-root.pem")
    args = [CA_SERVE, "--root-out", root, "--host", host, "--max-conns", "30", "--idle", "60"]
    for d in dns:
        args += ["--dns", d]
    for i in ips:
        args += ["--ip", i]
    args += list(extra)
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=CLEAN_ENV)
    servers.append(proc)
    line = proc.stdout.readline().decode().strip()
    if not line.startswith("port "):
        err = proc.stderr.read().decode() if proc.poll() is not None else ""
        raise SystemExit("ca_serve %s did not start: %r %s" % (name, line, err))
    return root, int(line.split()[1])


def curl(host, port, cafile=None, env=None, connect="127.0.0.1"):
    args = ["curl", "-sS", "--max-time", "10", "--noproxy", "*",
            "--resolve", "%s:%d:%s" % (host, port, connect)]
    if cafile:
        args += ["--cacert", cafile]
    url_host = "[%s]" % host if ":" in host else host
    return run(args + ["https://%s:%d/" % (url_host, port)], env=env)


def s_client(host, port, cafile, ip=False):
    # -ign_eof plus a real request: s_client must not quit on stdin EOF before its handshake
    # is done (it can, on a loaded machine); it ends when ca_serve answers and closes.
    args = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-verify_return_error",
            "-CAfile", cafile, "-showcerts", "-ign_eof"]
    args += ["-verify_ip", host] if ip else ["-servername", host, "-verify_hostname", host]
    return run(args, inp=b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")


def served_chain(out):
    return re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n", out, re.S)


def write(path, text):
    with open(path, "w") as f:
        f.write(text)
    return path


def x509_text(pem):
    return run(["openssl", "x509", "-noout", "-text"], inp=pem.encode())[1]


def test_inside_constraints():
    root, port = serve("dns", "api.example.com", dns=["api.example.com", "other.org"],
                       ips=["127.0.0.1"])
    st = os.stat(root)
    check(stat.S_IMODE(st.st_mode) == 0o644, "root file is mode 0644")
    with open(root) as f:
        root_pem = f.read()
    check(root_pem.count("BEGIN CERTIFICATE") == 1 and "PRIVATE" not in root_pem,
          "root file holds one certificate and no key")

    rc, out, err = curl("api.example.com", port, root)
    check(rc == 0 and out == "ok\n", "curl accepts the leaf for a listed name (rc %d %s)" %
          (rc, err.strip()))
    rc, out, err = curl("other.org", port, root)
    check(rc == 60, "curl rejects the leaf under another listed name (rc %d)" % rc)

    rc, out, err = s_client("api.example.com", port, root)
    check(rc == 0 and "Verify return code: 0 (ok)" in out,
          "s_client -verify_return_error verifies the chain (rc %d)" % rc)
    chain = served_chain(out)
    check(len(chain) == 2, "server sends leaf + intermediate, not the root (%d certs)" %
          len(chain))
    if len(chain) == 2:
        leaf = write(os.path.join(TMP, "leaf.pem"), chain[0])
        inter = write(os.path.join(TMP, "inter.pem"), chain[1])
        rc, out, err = run(["openssl", "verify", "-x509_strict", "-purpose", "sslserver",
                            "-CAfile", root, "-untrusted", inter,
                            "-verify_hostname", "api.example.com", leaf])
        check(rc == 0 and out.strip() == leaf + ": OK", "openssl verify -x509_strict: %s %s" %
              (out.strip(), err.strip()))
        text = x509_text(chain[0])
        san = re.search(r"Subject Alternative Name:\s*\n\s*(.*)\n", text)
        check(san is not None and san.group(1).strip() == "DNS:api.example.com",
              "leaf SAN is exactly DNS:api.example.com")
        check("TLS Web Server Authentication" in text and "CA:FALSE" in text and
              "Subject Key Identifier" in text and "Authority Key Identifier" in text and
              "ecdsa-with-SHA256" in text and "prime256v1" in text,
              "leaf has EKU serverAuth, CA:FALSE, SKI, AKI, ECDSA P-256 with SHA-256")
        itext = x509_text(chain[1])
        check("X509v3 Name Constraints: critical" in itext and "pathlen:0" in itext,
              "intermediate has critical name constraints and pathlen 0")
        rtext = x509_text(root_pem)
        check("CN = vaultgate run ca-serve" in rtext, "root CN names the run")
    return root, port


def test_ip_leaf():
    root, port = serve("ip", "127.0.0.1", dns=["api.example.com"], ips=["127.0.0.1"])
    rc, out, err = curl("127.0.0.1", port, root)
    check(rc == 0 and out == "ok\n", "curl accepts an IP leaf inside the constraints (rc %d %s)"
          % (rc, err.strip()))
    rc, out, err = s_client("127.0.0.1", port, root, ip=True)
    check(rc == 0 and "Verify return code: 0 (ok)" in out, "s_client verifies the IP leaf")


def test_outside_constraints():
    rc, out, err = run([CA_SERVE, "--root-out", os.path.join(TMP, "x.pem"), "--host", "evil.com",
                        "--dns", "api.example.com"])
    check(rc == 3 and "outside the name constraints" in err,
          "ca_serve refuses a host outside the constraints without --force")
    for name, host in (("evil", "evil.com"), ("sub", "sub.api.example.com"),
                       ("ipout", "127.0.0.2")):
        root, port = serve(name, host, dns=["api.example.com"], ips=["127.0.0.1"],
                           extra=["--force"])
        rc, out, err = curl(host, port, root)
        check(rc == 60 and out == "", "curl rejects %s outside the constraints (rc %d: %s)" %
              (host, rc, err.strip().splitlines()[0] if err.strip() else ""))
        rc, out, err = s_client(host, port, root, ip=host[0].isdigit())
        check(rc != 0 and ("subtree violation" in out + err),
              "s_client rejects %s with a subtree violation" % host)


def test_unconstrained():
    root, port = serve("any", "anything.test", extra=["--unconstrained"])
    rc, out, err = curl("anything.test", port, root)
    check(rc == 0 and out == "ok\n", "an unconstrained CA serves any name (rc %d)" % rc)


def parse_exports(out):
    env = {}
    for line in out.splitlines():
        m = re.fullmatch(r"export ([A-Z_]+)=(.*)", line)
        if m is None:
            return None
        env[m.group(1)] = m.group(2)
    return env


def test_trust(root, port):
    if not (VG_BIN and os.access(VG_BIN, os.X_OK)):
        check(False, "VG_BIN is an executable vaultgate (%r)" % VG_BIN)
        return
    d = os.path.join(TMP, "trust")
    os.makedirs(d)
    ca = shutil.copy(root, os.path.join(d, "ca.pem"))
    # a stand-in for the system store: two unrelated self-signed certificates
    sysroots = os.path.join(d, "system.crt")
    with open(sysroots, "w") as f:
        for i in range(2):
            key = os.path.join(d, "k%d" % i)
            rc, pem, err = run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                                "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-subj",
                                "/CN=sysroot%d" % i, "-days", "1"])
            os.unlink(key)
            f.write(pem)
    rc, out, err = run([VG_BIN, "trust", "--ca", ca, "--system-roots", sysroots])
    bundle = os.path.join(d, "bundle.pem")
    # stderr: at most the note that the temp dir (0700) keeps other users out
    check(rc == 0 and all(l.startswith("vaultgate trust: note: ")
                          for l in err.splitlines()), "vaultgate trust exits 0 (rc %d %s)" %
          (rc, err.strip()))
    env = parse_exports(out)
    check(env is not None and list(env)[:5] == ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                                "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS",
                                                "GIT_SSL_CAINFO"],
          "prints the five export lines of SPEC §2 first: %r" % out)
    if env is None:
        return
    check(all(env[k] == bundle for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE",
                                         "CURL_CA_BUNDLE", "GIT_SSL_CAINFO")),
          "four variables name the bundle <dir of --ca>/bundle.pem")
    check(env["NODE_EXTRA_CA_CERTS"] == ca, "NODE_EXTRA_CA_CERTS names the root alone")
    with open(bundle) as f:
        b = f.read()
    with open(ca) as f:
        r = f.read()
    with open(sysroots) as f:
        s = f.read()
    check(b == r + s, "bundle = the root first, then the system roots, byte for byte")
    check(stat.S_IMODE(os.stat(bundle).st_mode) == 0o644, "bundle is mode 0644")

    # the lines are sourceable, and runtimes trust the chain through them
    sh = 'eval "$(%s trust --ca %s --system-roots %s)" && curl -sS --max-time 10 --noproxy "*" ' \
         '--resolve api.example.com:%d:127.0.0.1 https://api.example.com:%d/' % (
             VG_BIN, ca, sysroots, port, port)
    rc, out, err = run(["sh", "-c", sh])
    check(rc == 0 and out == "ok\n", "curl trusts the chain via CURL_CA_BUNDLE (rc %d %s)" %
          (rc, err.strip()))
    pyenv = dict(CLEAN_ENV, SSL_CERT_FILE=env["SSL_CERT_FILE"])
    py = ("import socket, ssl, sys\n"
          "ctx = ssl.create_default_context()\n"
          "ctx.verify_flags |= ssl.VERIFY_X509_STRICT\n"
          "s = ctx.wrap_socket(socket.create_connection(('127.0.0.1', %d), timeout=10),"
          " server_hostname='api.example.com')\n"
          "s.sendall(b'GET / HTTP/1.1\\r\\nHost: api.example.com\\r\\n\\r\\n')\n"
          "sys.stdout.write(s.recv(4096).decode().split('\\r\\n\\r\\n')[1])\n" % port)
    rc, out, err = run([sys.executable, "-c", py], env=pyenv)
    check(rc == 0 and out == "ok\n", "Python ssl (X509_STRICT) trusts the chain via "
          "SSL_CERT_FILE (rc %d %s)" % (rc, err.strip()[-200:]))
    node = shutil.which("node")
    if node:
        js = ("require('https').get({host: '127.0.0.1', port: %d, servername: 'api.example.com',"
              " headers: {Host: 'api.example.com'}}, r => { let b = ''; r.on('data', d => b += d);"
              " r.on('end', () => process.stdout.write(b)); })"
              ".on('error', e => { console.error(e.message); process.exit(1); });" % port)
        rc, out, err = run([node, "-e", js],
                           env=dict(CLEAN_ENV, NODE_EXTRA_CA_CERTS=env["NODE_EXTRA_CA_CERTS"]))
        check(rc == 0 and out == "ok\n", "Node trusts the chain via NODE_EXTRA_CA_CERTS "
              "(rc %d %s)" % (rc, err.strip()[-200:]))
        rc, out, err = run([node, "-e", js])
        check(rc != 0, "Node without NODE_EXTRA_CA_CERTS rejects the chain")
    git = shutil.which("git")
    if git:
        args = [git, "-c", "http.curloptResolve=api.example.com:%d:127.0.0.1" % port,
                "ls-remote", "https://api.example.com:%d/repo.git" % port]
        rc, out, err = run(args, env=dict(CLEAN_ENV, GIT_SSL_CAINFO=env["GIT_SSL_CAINFO"],
                                          GIT_TERMINAL_PROMPT="0", HOME=d))
        check("certificate" not in err.lower() and "ssl" not in err.lower(),
              "git gets past TLS via GIT_SSL_CAINFO (%s)" % err.strip()[-200:])
        rc, out, err = run(args, env=dict(CLEAN_ENV, GIT_TERMINAL_PROMPT="0", HOME=d))
        check(rc != 0 and "certificate" in err.lower(),
              "git without GIT_SSL_CAINFO rejects the chain")

    # --bundle-out, quoting, usage errors and bad inputs
    odd = os.path.join(d, "it's here")
    os.makedirs(odd)
    rc, out, err = run(["sh", "-c", 'eval "$(%s trust --ca %s --system-roots %s '
                        '--bundle-out %s)" && printf %%s "$SSL_CERT_FILE"' % (
                            VG_BIN, ca, sysroots, shlex.quote(odd + "/b.pem"))])
    check(rc == 0 and out == odd + "/b.pem", "a path with a quote survives eval (%r)" % out)
    rc, out, err = run([VG_BIN, "trust"])
    check(rc == 2 and len(err.strip().splitlines()) == 1 and out == "",
          "no --ca: one line, exit 2")
    rc, out, err = run([VG_BIN, "trust", "--ca", ca, "--what"])
    check(rc == 2 and len(err.strip().splitlines()) == 1, "unknown option: one line, exit 2")
    rc, out, err = run([VG_BIN, "trust", "--help"])
    check(rc == 0 and "--bundle-out" in out, "--help prints usage, exit 0")
    rc, out, err = run([VG_BIN, "trust", "--ca", os.path.join(d, "missing.pem")])
    check(rc == 1 and "missing.pem" in err and out == "", "unreadable --ca: exit 1 with a reason")
    two = write(os.path.join(d, "two.pem"), r + s)
    rc, out, err = run([VG_BIN, "trust", "--ca", two, "--system-roots", sysroots,
                        "--bundle-out", os.path.join(d, "x.pem")])
    check(rc == 1 and "expected the one root certificate" in err, "--ca with 3 certs: exit 1")
    leaf_only = os.path.join(TMP, "leaf.pem")
    if os.path.exists(leaf_only):
        rc, out, err = run([VG_BIN, "trust", "--ca", leaf_only, "--system-roots", sysroots,
                            "--bundle-out", os.path.join(d, "x.pem")])
        check(rc == 1 and "not a self-signed CA" in err, "--ca with a leaf: exit 1")
    rc, out, err = run([VG_BIN, "trust", "--ca", ca, "--system-roots",
                        os.path.join(d, "nope.crt")])
    check(rc == 1 and "nope.crt" in err, "unreadable --system-roots: exit 1 with a reason")
    check(not os.path.exists(os.path.join(d, "x.pem")), "no bundle written on failure")


def main():
    for tool in ("curl", "openssl"):
        if shutil.which(tool) is None:
            print("skip: %s not installed" % tool)
            return 77
    if not os.access(CA_SERVE, os.X_OK):
        print("skip: %s not built" % CA_SERVE)
        return 77
    try:
        root, port = test_inside_constraints()
        test_ip_leaf()
        test_outside_constraints()
        test_unconstrained()
        test_trust(root, port)
    finally:
        for p in servers:
            p.terminate()
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                p.kill()
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
