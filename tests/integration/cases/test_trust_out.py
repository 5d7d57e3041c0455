#!/usr/bin/env python3
"""`run --trust-out DIR` (SPEC §13): by the time /readyz first answers 200, DIR holds what
`vaultgate trust` writes - bundle.pem (the run's root first, then the system roots), ca.pem, the
Java truststore, wgetrc - and trust.env with exactly the lines `vaultgate trust` prints for the
same files, every file 0644 and no temporary file left; a shell that sources trust.env makes
curl and Python's ssl trust the run with no other option; the files hold no key. A --trust-out
that cannot be written stops the start with exit 4 and one line naming --trust-out, and nothing
listens."""
import os
import socket
import stat
import subprocess
import vgtest as t

SECRET = "sk-canary-TRUSTOUT-0001"
t.require_binary()
d = t.tmpdir()
out = os.path.join(d, "trust")  # made by vaultgate
certs = t.make_certs(d, ["api.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"])
vg = t.Vaultgate(d, t.example_vault(secrets={"API_KEY": {"value": SECRET}}),
                 pins=[up.pin("api.example.test")], upstream_ca=certs["ca"],
                 extra=["--trust-out", out])
try:
    vg.start(wait=False)
    # the first 200 from /readyz: everything must be there already
    vg.wait_ready()
    files = sorted(os.listdir(out))
    t.check(files == ["bundle.pem", "ca.pem", "trust.env", "truststore.p12", "wgetrc"],
            "files in --trust-out: %r" % files)
    for f in files:
        mode = stat.S_IMODE(os.stat(os.path.join(out, f)).st_mode)
        t.check(mode == 0o644, "%s has mode %o" % (f, mode))
    root = open(vg.ca).read()
    t.check(open(os.path.join(out, "ca.pem")).read() == root, "ca.pem is not the run's root")
    bundle = open(os.path.join(out, "bundle.pem")).read()
    system = open("/etc/ssl/certs/ca-certificates.crt").read()
    t.check(bundle.startswith(root) and bundle[len(root):].lstrip("\n") == system,
            "bundle is not the root followed by the system roots")
    for f in files:
        t.check(b"PRIVATE KEY" not in open(os.path.join(out, f), "rb").read(), "key in " + f)
    p12 = subprocess.run(["openssl", "pkcs12", "-in", os.path.join(out, "truststore.p12"),
                          "-nokeys", "-passin", "pass:"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    t.check(p12.returncode == 0 and p12.stdout.count(b"BEGIN CERTIFICATE") ==
            bundle.count("BEGIN CERTIFICATE"), "truststore: %r" % p12.stderr[-300:])

    # trust.env is what `vaultgate trust` prints for the same files
    env = open(os.path.join(out, "trust.env")).read()
    tr = subprocess.run([t.VG_BIN, "trust", "--ca", os.path.join(out, "ca.pem"), "--bundle-out",
                         os.path.join(out, "bundle.pem")], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE)
    t.check(tr.returncode == 0, "vaultgate trust: %r" % tr.stderr)
    t.check(env == tr.stdout.decode(), "trust.env differs from `vaultgate trust`:\n%s\n---\n%s" %
            (env, tr.stdout.decode()))
    for var in ("SSL_CERT_FILE", "CURL_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "JAVA_TOOL_OPTIONS"):
        t.check("export %s=" % var in env, "trust.env lacks %s" % var)

    # a sandbox that sources it trusts the run: curl and Python with no CA option of their own
    url = "https://api.example.test:%d/" % vg.port
    pin = "api.example.test:%d:127.0.0.1" % vg.port
    sh = subprocess.run(
        ["sh", "-c", '. "$1" && curl -sS --max-time 20 --resolve "$2" "$3" && '
         'python3 -c "import ssl,socket,sys; c=ssl.create_default_context(); '
         's=c.wrap_socket(socket.create_connection((\'127.0.0.1\',int(sys.argv[1]))),'
         'server_hostname=\'api.example.test\'); print(s.version())" "$4"',
         "sh", os.path.join(out, "trust.env"), pin, url, str(vg.port)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
    t.check(sh.returncode == 0, "a client trusting trust.env failed: %r" % sh.stderr[-500:])
    t.check(up.requests and up.requests[-1].header("Authorization") == ["Bearer " + SECRET],
            "curl's request was not injected")
    t.check(sh.stdout.decode().startswith("ok") and "TLSv1.3" in sh.stdout.decode(),
            "client output %r" % sh.stdout)
finally:
    rc = vg.stop()
t.check(rc == 0, "exit %s" % rc)
t.check_absent({"log": vg.stderr(), "trust files": "".join(
    open(os.path.join(out, f), "rb").read().decode("latin-1") for f in os.listdir(out))},
    [SECRET])

# a --trust-out that cannot be made: exit 4 before anything listens
blocker = os.path.join(d, "file")
open(blocker, "w").close()
os.makedirs(os.path.join(d, "bad"))
bad = t.Vaultgate(os.path.join(d, "bad"), t.example_vault(),
                  extra=["--trust-out", os.path.join(blocker, "trust")])
p = subprocess.run(bad.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
err = [ln for ln in p.stderr.decode().splitlines() if not ln.startswith("{")]  # not log lines
t.check(p.returncode == 4, "unwritable --trust-out: exit %d %r" % (p.returncode, err))
t.check(len(err) == 1 and err[0].startswith("vaultgate run: --trust-out ") and
        err[0].endswith(": Not a directory"), "unwritable --trust-out: %r" % err)
s = socket.socket()
t.check(s.connect_ex(("127.0.0.1", bad.port)) != 0, "a listener was left")
s.close()
up.stop()
