#!/usr/bin/env python3
"""`vaultgate trust` for every runtime a sandbox commonly holds (SPEC §11): curl, Python, Node,
Go (when installed), Java, npm with an npmrc whose cafile lacks the run's root, wget, git and a
gRPC client (Debian's python3-grpcio with grpc.ssl_channel_credentials(), the default roots,
calling a real grpcio server behind vaultgate) each reach an intercepted host through vaultgate with nothing in their environment but the printed
lines (plus PATH and HOME), run as the unprivileged user nobody - so the bundle, the root copy,
the truststore and the wgetrc are readable where a sandbox user reads them (here a shared
directory given with --ca-out; the state directory, 0711, would do as well). Each runtime also runs once
without the lines and must then fail verification, so no case passes by accident. Success is
judged by the upstream: the runtime's own path arrives there only after the runtime verified
vaultgate's certificate. Also: the note for a bundle inside a directory others cannot enter, the
truststore's entries (keytool), and the order of the printed lines.

Runs in its own network and mount namespace: loopback only, /etc/hosts replaced by one that
maps api.example.test and grpc.example.test to vaultgate's listener on 127.0.0.1:443. Runs under
/usr/bin/python3 when that is where grpcio is (Debian's modules)."""
import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    import grpc
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    grpc = None
from concurrent import futures  # noqa: E402

import vgtest as t  # noqa: E402

HOST = "api.example.test"
GRPC_HOST = "grpc.example.test"
grpc_seen = []  # what the gRPC server received: the path of the URL a runtime was given


def isolate():
    """Re-executes this case in new network and mount namespaces (loopback up, our hosts)."""
    if os.environ.get("VG_TRUST_NS") == "1":
        return
    if os.geteuid() != 0 or not shutil.which("unshare"):
        t.skip("needs root and unshare (network and mount namespaces)")
    hosts = os.path.join(t.tmpdir(), "hosts")
    with open(hosts, "w") as f:
        f.write("127.0.0.1 localhost %s %s\n::1 localhost\n" % (HOST, GRPC_HOST))
    os.chmod(hosts, 0o644)
    env = dict(os.environ, VG_TRUST_NS="1")
    sys.stdout.flush()
    os.execvpe("unshare", ["unshare", "--net", "--mount", "--", "sh", "-c",
                           'mount --bind "$1" /etc/hosts && ip link set lo up && shift && '
                           'exec "$@"', "sh", hosts, sys.executable,
                           os.path.abspath(sys.argv[0])], env)


def handler(req, ci):
    return [t.resp_bytes(200, b"{}\n", [("Content-Type", "application/json")])]


def grpc_unary(req, ctx):
    grpc_seen.append(req.decode())
    return b"ok"


def grpc_server(certs):
    """A grpcio server with the upstream certificate on 127.x.y.z:443; returns (server, addr)."""
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("echo.Echo", {
        "Unary": grpc.unary_unary_rpc_method_handler(grpc_unary)}),))
    addr = t.free_loopback_addr()
    with open(certs["key"], "rb") as f:
        key = f.read()
    with open(certs["cert"], "rb") as f:
        crt = f.read()
    server.add_secure_port("%s:443" % addr, grpc.ssl_server_credentials(((key, crt),)))
    server.start()
    return server, addr


# gRPC core with default credentials: no roots given, so it reads
# GRPC_DEFAULT_SSL_ROOTS_FILE_PATH or else its own; the URL's path travels as the message
GRPC_CLIENT = """
import sys, urllib.parse, grpc
u = urllib.parse.urlsplit(sys.argv[1])
ch = grpc.secure_channel("%s:443" % u.hostname, grpc.ssl_channel_credentials())
print(ch.unary_unary("/echo.Echo/Unary")(u.path.encode(), timeout=20))
"""


def reached(up, prefix):
    return (any(q.target.startswith(prefix) for q in up.requests) or
            any(p.startswith(prefix) for p in grpc_seen))


def as_nobody(args, env, cwd, timeout=120):
    return subprocess.run(["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           "--"] + args, env=env, cwd=cwd, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, timeout=timeout)


JAVA = """
import java.net.URL;
import java.io.InputStream;
public class Fetch {
    public static void main(String[] a) throws Exception {
        try (InputStream in = new URL(a[0]).openStream()) { in.readAllBytes(); }
        System.out.println("ok");
    }
}
"""

GO = """package main
import ("net/http"; "os"; "fmt")
func main() {
    r, err := http.Get(os.Args[1])
    if err != nil { fmt.Println(err); os.Exit(1) }
    r.Body.Close()
    fmt.Println("ok")
}
"""


def runtimes(work):
    """(name, argv builder(url), needs) for each runtime present."""
    out = []
    py = "/usr/bin/python3"
    out.append(("curl", lambda u: ["curl", "-sS", "--max-time", "20", "-o", "/dev/null", u]))
    out.append(("python", lambda u: [py, "-c", "import urllib.request,sys; "
                                     "urllib.request.urlopen(sys.argv[1], timeout=20).read()", u]))
    out.append(("wget", lambda u: ["wget", "-q", "-T", "20", "-t", "1", "-O", "/dev/null", u]))
    out.append(("git", lambda u: ["git", "-c", "http.lowSpeedTime=20", "ls-remote", u + ".git"]))
    if shutil.which("node"):
        out.append(("node", lambda u: ["node", "-e", "require('https').get(process.argv[1], r => "
                                       "{r.resume(); r.on('end', () => process.exit(0))})"
                                       ".on('error', e => {console.error(e.message); "
                                       "process.exit(1)})", u]))
    if shutil.which("npm"):
        # a project whose npmrc names a cafile without the run's root, and a registry behind
        # vaultgate: npm ignores NODE_EXTRA_CA_CERTS then; NPM_CONFIG_CAFILE must win
        proj = os.path.join(work, "npmproj")
        os.makedirs(proj, exist_ok=True)
        with open(os.path.join(proj, ".npmrc"), "w") as f:
            f.write("cafile=/etc/ssl/certs/ca-certificates.crt\nfund=false\naudit=false\n"
                    "update-notifier=false\n")
        out.append(("npm", lambda u: ["sh", "-c", 'cd "$0" && exec npm ping --registry "$1/" '
                                      '--fetch-retries 0 --fetch-timeout 20000', proj, u]))
    if shutil.which("java") and shutil.which("javac"):
        src = os.path.join(work, "Fetch.java")
        with open(src, "w") as f:
            f.write(JAVA)
        out.append(("java", lambda u: ["java", src, u]))
    if grpc is not None:
        out.append(("grpc", lambda u: [sys.executable, "-c", GRPC_CLIENT, u]))
    else:
        t.log("note: python3-grpcio is not installed; GRPC_DEFAULT_SSL_ROOTS_FILE_PATH is not "
              "exercised here")
    if shutil.which("go"):
        src = os.path.join(work, "fetch.go")
        with open(src, "w") as f:
            f.write(GO)
        out.append(("go", lambda u: ["go", "run", src, u]))
    else:
        t.log("note: go is not installed; its SSL_CERT_FILE is not exercised here")
    return out


def main():
    isolate()
    t.require_binary()
    d = t.tmpdir()
    os.chmod(d, 0o755)
    work = tempfile.mkdtemp(prefix="trust-", dir=d)
    os.chmod(work, 0o1777)
    shared = os.path.join(d, "shared")  # what a sandbox would mount
    os.makedirs(shared, 0o755)
    certs = t.make_certs(d, [HOST, GRPC_HOST])
    up = t.FakeUpstream(certs["cert"], certs["key"], handler)
    pins = [up.pin(HOST)]
    gserver = None
    if grpc is not None:
        gserver, gaddr = grpc_server(certs)
        pins.append("%s:443:%s" % (GRPC_HOST, gaddr))
    vault = t.example_vault(rules=[
        {"host_pattern": HOST, "secret": "API_KEY", "scheme": "bearer"},
        {"host_pattern": GRPC_HOST, "secret": "API_KEY", "scheme": "bearer"}])
    vg = t.Vaultgate(d, vault, pins=pins, upstream_ca=certs["ca"],
                     https_port=443, extra=["--ca-out", os.path.join(shared, "ca.pem")])
    vg.ca = os.path.join(shared, "ca.pem")
    os.chmod(vg.vault_path, 0o600)
    vg.start()
    st = os.stat(vg.state)
    t.check(st.st_mode & 0o777 == 0o711, "state dir mode %o" % (st.st_mode & 0o777))

    # the default bundle beside a CA in a 0700 directory: a note says who cannot read it
    private = os.path.join(d, "private")
    os.makedirs(private, 0o700)
    tmpca = os.path.join(private, "ca-copy.pem")
    shutil.copy(vg.ca, tmpca)
    p = subprocess.run([t.VG_BIN, "trust", "--ca", tmpca], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    t.check(p.returncode == 0 and b"keeps other users out" in p.stderr and
            private.encode() in p.stderr, "no note for a 0700 directory: %r" % p.stderr)

    p = subprocess.run([t.VG_BIN, "trust", "--ca", vg.ca], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE)
    t.check(p.returncode == 0 and p.stderr == b"", "trust: %d %r" % (p.returncode, p.stderr))
    lines = p.stdout.decode().splitlines()
    names = [l.split("=", 1)[0][len("export "):] for l in lines]
    t.check(names == ["SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE",
                      "NODE_EXTRA_CA_CERTS", "GIT_SSL_CAINFO", "PIP_CERT", "AWS_CA_BUNDLE",
                      "CARGO_HTTP_CAINFO", "DENO_CERT", "CLOUDSDK_CORE_CUSTOM_CA_CERTS_FILE",
                      "GRPC_DEFAULT_SSL_ROOTS_FILE_PATH", "NPM_CONFIG_CAFILE", "WGETRC", "JAVA_TOOL_OPTIONS"], "lines %r" % names)
    printed = {}
    for l in lines:
        k, _, v = l[len("export "):].partition("=")
        printed[k] = shlex.split(v)[0]
    for f in ("bundle.pem", "truststore.p12", "wgetrc", "ca.pem"):
        m = os.stat(os.path.join(shared, f)).st_mode & 0o777
        t.check(m == 0o644, "%s mode %o" % (f, m))
    if shutil.which("keytool"):
        k = subprocess.run(["keytool", "-list", "-keystore", os.path.join(shared,
                            "truststore.p12"), "-storetype", "PKCS12", "-noprompt"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, input=b"\n")
        out = k.stdout.decode()
        with open(os.path.join(shared, "bundle.pem")) as f:
            nb = f.read().count("BEGIN CERTIFICATE")
        t.check("vaultgate-run-root, " in out and out.count("trustedCertEntry") == nb,
                "truststore entries: %d of %d" % (out.count("trustedCertEntry"), nb))

    home = os.path.join(work, "home")
    os.makedirs(home)
    shutil.chown(home, "nobody", "nogroup")
    base = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home,
            "GOCACHE": os.path.join(home, "gocache"), "GOFLAGS": "-mod=mod",
            "GOTOOLCHAIN": "local", "GOPROXY": "off"}
    failures = []
    for name, argv in runtimes(work):
        host = GRPC_HOST if name == "grpc" else HOST
        url = "https://%s/trust/%s" % (host, name)
        r = as_nobody(argv(url), dict(base, **printed), work)
        if not reached(up, "/trust/%s" % name):
            failures.append("%s with the lines did not reach the upstream: %d %s" %
                            (name, r.returncode, (r.stdout + r.stderr).decode(errors="replace")
                             [-600:]))
            continue
        bare = "https://%s/bare/%s" % (host, name)
        r = as_nobody(argv(bare), dict(base), work)
        if reached(up, "/bare/%s" % name) or r.returncode == 0:
            failures.append("%s reached vaultgate without the lines (exit %d)" %
                            (name, r.returncode))
            continue
        if name == "npm":  # the reason for NPM_CONFIG_CAFILE: with a cafile npm ignores Node's
            part = "https://%s/part/npm" % HOST
            r = as_nobody(argv(part), dict(base, **{k: v for k, v in printed.items()
                                                   if k != "NPM_CONFIG_CAFILE"}), work)
            if any(q.target.startswith("/part/npm") for q in up.requests) or r.returncode == 0:
                failures.append("npm with a cafile npmrc trusted NODE_EXTRA_CA_CERTS")
                continue
        t.log("ok %s: verified with the lines only, refused without them" % name)
    t.check(not failures, "\n".join(failures))
    t.check(vg.stop() == 0, "stop")
    if gserver is not None:
        gserver.stop(0)


if __name__ == "__main__":
    main()
