#!/usr/bin/env python3
"""SigV4 requests keep Range and If-Range (SPEC §3, §4 "Reflection"), and the canonical URI is
derived from the path exactly as forwarded (SPEC §3), against real clients and an S3 upstream
over TLS that verifies every signature with botocore (tests/integration/lib/sigv4ref.py) and
honours Range with 206 and Content-Range.

- boto3 download_file of a 20 MiB object (over the 8 MiB multipart threshold: HeadObject, then
  ranged GetObjects in parallel): the file is byte for byte the object.
- boto3 get_object(Range='bytes=100-199') gets exactly those 100 bytes; If-Range is forwarded.
- The AWS CLI (Debian's awscli, /usr/bin/aws) `aws s3 cp s3://bucket/key file` of the same
  object through the explicit proxy, AWS_CA_BUNDLE, placeholder keys: the file is identical.
- curl --http2 --aws-sigv4 -r (an HTTP/2 client) gets its range.
- A 206 slice that holds the secret key and the session token comes back masked.
- A hand-written Bedrock client's raw ':' in the model id (/model/x.y-1:0/invoke) is signed as
  the service computes it from that path (%3A), and the one boto3 sends (%3A) as %253A.
- A bearer rule still strips Range and If-Range (its secret travels; slices could rebuild it).
- Canaries: the secret key, the token and every signature appear in no log, metric, status,
  audit row or answer.

Why this can fail: Range or If-Range removed from SigV4 requests (every part of a multipart
download gets the whole object: a file of the wrong size, exit 0), a canonical URI built from a
decoded path (botocore refuses the raw ':' request), or a bearer request that keeps Range."""
import hashlib
import json
import os
import re
import socket
import subprocess
import threading

import vgtest as t
import sigv4ref
from h2server import need_h2

need_h2()
for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
          "HTTPS_PROXY", "https_proxy", "AWS_CA_BUNDLE", "NO_PROXY", "no_proxy"):
    os.environ.pop(v, None)
os.environ.update(AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
                  AWS_EC2_METADATA_DISABLED="true")
import boto3  # noqa: E402
import botocore.auth  # noqa: E402
import botocore.credentials  # noqa: E402
import botocore.httpsession  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.config import Config  # noqa: E402

AKID = "AKIAVGTESTRANGEKEY01"
SECRET = "wJalrCANARYrangeKEY/0003+vaultgateTESTzz"
TOKEN = "IQoJb3JpZ2luCANARYrangeTOKEN/0004+vaultgate=="
BEARER_SECRET = "sk-CANARY-range-bearer-0005"
PLACE = ("AKIAPLACEHOLDER00000", "placeholder-secret-key", "placeholder-session-token")
S3, BEDROCK, API = "s3.range.test", "bedrock-runtime.range.test", "api.range.test"
SERVICE = {S3: ("s3", TOKEN), BEDROCK: ("bedrock", None)}
AWS_CLI = "/usr/bin/aws"

BIG = os.urandom(20 * 1024 * 1024 + 12345)
ECHO = b"0123456789" * 10 + SECRET.encode() + b"|" + TOKEN.encode() + b"|" + b"z" * 100
OBJECTS = {"/bucket/big.bin": BIG, "/bucket/echo.txt": ECHO}
ETAG = {k: '"%s"' % hashlib.md5(v).hexdigest() for k, v in OBJECTS.items()}
RANGE_RE = re.compile(r"^bytes=(\d+)-(\d*)$")

verdicts = []  # (host, Verdict, method, target, Range fields, If-Range fields)
lock = threading.Lock()


def check_request(host, method, target, fields, body):
    service, token = SERVICE[host]
    v = sigv4ref.verify(method, host, target, fields, body, AKID, SECRET, "us-east-1", service,
                        token)
    raw = repr(fields).encode() + body
    for p in PLACE:
        if p.encode() in raw:
            v = sigv4ref.Verdict(False, "placeholder %r reached the upstream" % p, v.signature)
    rng = [x for n, x in fields if n.lower() == "range"]
    ifr = [x for n, x in fields if n.lower() == "if-range"]
    with lock:
        verdicts.append((host, v, method, target, rng, ifr))
    return v


def s3_get(method, target, rng):
    path = target.split("?", 1)[0]
    data = OBJECTS.get(path)
    if data is None:
        return [t.resp_bytes(404, b"<Error><Code>NoSuchKey</Code></Error>",
                             [("Content-Type", "application/xml")])]
    common = [("ETag", ETAG[path]), ("Last-Modified", "Wed, 01 Jan 2025 00:00:00 GMT"),
              ("Accept-Ranges", "bytes"), ("Content-Type", "application/octet-stream")]
    if method == "HEAD":
        return [t.resp_bytes(200, b"", common + [("Content-Length", str(len(data)))])]
    if not rng:
        return [t.resp_bytes(200, data, common)]
    m = RANGE_RE.match(rng[0])
    if len(rng) != 1 or not m or int(m.group(1)) >= len(data):
        return [t.resp_bytes(416, b"", [("Content-Range", "bytes */%d" % len(data))],
                             reason="Range Not Satisfiable")]
    first = int(m.group(1))
    last = min(int(m.group(2)) if m.group(2) else len(data) - 1, len(data) - 1)
    return [t.resp_bytes(206, data[first:last + 1], common + [
        ("Content-Range", "bytes %d-%d/%d" % (first, last, len(data)))],
        reason="Partial Content")]


def handler(req, ci):
    host = req.header("Host")[0]
    if host == API:
        return [t.resp_bytes(200, json.dumps({"range": req.header("Range"),
                                              "if_range": req.header("If-Range")}).encode(),
                             [("Content-Type", "application/json")])]
    v = check_request(host, req.method, req.target, req.fields, req.body)
    if not v.ok:
        return [t.resp_bytes(403, ("<Error><Code>SignatureDoesNotMatch</Code><Message>%s"
                                   "</Message></Error>" % v.reason).encode(),
                             [("Content-Type", "application/xml")], reason="Forbidden")]
    if host == S3:
        return s3_get(req.method, req.target, req.header("Range"))
    return [t.resp_bytes(200, b'{"completion":"ok"}', [("Content-Type", "application/json")])]


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, [S3, BEDROCK, API])
up = t.FakeUpstream(certs["cert"], certs["key"], handler)


def rule(host, service, token):
    r = {"host_pattern": host, "secret": "AWS_SECRET_ACCESS_KEY", "scheme": "sigv4",
         "access_key_id": AKID, "region": "us-east-1", "service": service}
    if token:
        r["session_token"] = "AWS_SESSION_TOKEN"
    return r


vault = t.example_vault(
    secrets={"AWS_SECRET_ACCESS_KEY": {"value": SECRET}, "AWS_SESSION_TOKEN": {"value": TOKEN},
             "API_KEY": {"value": BEARER_SECRET}},
    rules=[rule(h, s, tok) for h, (s, tok) in SERVICE.items()] +
    [{"host_pattern": API, "secret": "API_KEY", "scheme": "bearer"}], hosts={})
vg = t.Vaultgate(d, vault, pins=[up.pin(h) for h in (S3, BEDROCK, API)], upstream_ca=certs["ca"],
                 proxy=True, audit="sqlite").start()
PROXY = "http://127.0.0.1:%d" % vg.proxy_port
answers = []  # every byte the sandbox got back


def s3client():
    s = boto3.session.Session(aws_access_key_id=PLACE[0], aws_secret_access_key=PLACE[1],
                              aws_session_token=PLACE[2], region_name="us-east-1")
    return s.client("s3", endpoint_url="https://" + S3, verify=vg.ca,
                    config=Config(proxies={"https": PROXY}, retries={"max_attempts": 1},
                                  s3={"addressing_style": "path"}, connect_timeout=10,
                                  read_timeout=60))


def proxied_raw(host, head):
    """A raw HTTP/1.1 request through CONNECT (Connection: close); returns the response."""
    raw = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=30)
    raw.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(),
                                                                        host.encode()))
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += raw.recv(4096)
    s = vg.client_ctx().wrap_socket(raw, server_hostname=host)
    s.sendall(head)
    out = t.read_until_close(s)
    s.close()
    answers.append(out)
    return t.parse_response(out)[0]


def s3_gets():
    with lock:
        return [x for x in verdicts if x[0] == S3 and x[2] == "GET"]


try:
    s3 = s3client()

    # -- boto3 download_file: multipart, ranged GetObjects --------------------------------------
    n0 = len(s3_gets())
    dst = os.path.join(d, "boto3-big.bin")
    s3.download_file("bucket", "big.bin", dst)
    with open(dst, "rb") as f:
        got = f.read()
    t.check(len(got) == len(BIG), "download_file wrote %d bytes for a %d-byte object" %
            (len(got), len(BIG)))
    t.check(got == BIG, "download_file: the file differs from the object")
    ranged = [x for x in s3_gets()[n0:] if x[4]]
    t.check(len(ranged) >= 3, "download_file made %d ranged GETs" % len(ranged))

    # -- get_object with a Range, If-Range forwarded -------------------------------------------
    r = s3.get_object(Bucket="bucket", Key="big.bin", Range="bytes=100-199")
    body = r["Body"].read()
    answers.append(body)
    t.check(len(body) == 100 and body == BIG[100:200],
            "get_object(Range=bytes=100-199) returned %d bytes" % len(body))
    t.check(r["ContentRange"] == "bytes 100-199/%d" % len(BIG), "Content-Range %r" %
            r.get("ContentRange"))
    last = s3_gets()[-1]
    t.check(last[1].ok and last[4] == ["bytes=100-199"], "Range at the upstream: %r" % (last,))
    r = s3.get_object(Bucket="bucket", Key="big.bin", Range="bytes=5-9",
                      IfMatch=ETAG["/bucket/big.bin"])
    t.check(r["Body"].read() == BIG[5:10], "ranged get_object with IfMatch")
    # If-Range (boto3 has no parameter for it): a hand-written request signed by botocore
    session = botocore.httpsession.URLLib3Session(verify=vg.ca, proxies={"https": PROXY},
                                                  timeout=30)
    req = AWSRequest(method="GET", url="https://%s/bucket/big.bin" % S3,
                     headers={"Range": "bytes=1000-1099", "If-Range": ETAG["/bucket/big.bin"]})
    botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(*PLACE), "s3",
                              "us-east-1").add_auth(req)
    resp = session.send(req.prepare())
    answers.append(resp.content)
    t.check(resp.status_code == 206 and resp.content == BIG[1000:1100],
            "If-Range request: %d, %d bytes" % (resp.status_code, len(resp.content)))
    last = s3_gets()[-1]
    t.check(last[1].ok and last[5] == [ETAG["/bucket/big.bin"]], "If-Range at the upstream: %r"
            % (last,))

    # -- a 206 slice holding the key and the token comes back masked ---------------------------
    r = s3.get_object(Bucket="bucket", Key="echo.txt", Range="bytes=90-%d" % (len(ECHO) - 50))
    body = r["Body"].read()
    answers.append(body)
    want = ECHO[90:len(ECHO) - 49].replace(SECRET.encode(), b"*" * len(SECRET)) \
        .replace(TOKEN.encode(), b"*" * len(TOKEN))
    t.check(body == want, "the 206 slice was not masked as expected: %r" % body[:200])

    # -- the AWS CLI (Debian awscli) ------------------------------------------------------------
    t.check(os.access(AWS_CLI, os.X_OK), "%s is missing (Debian awscli, scripts/deps)" % AWS_CLI)
    cfg = os.path.join(d, "aws-config")
    with open(cfg, "w") as f:
        f.write("[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n")
    env = dict(os.environ, AWS_CONFIG_FILE=cfg, AWS_ACCESS_KEY_ID=PLACE[0],
               AWS_SECRET_ACCESS_KEY=PLACE[1], AWS_SESSION_TOKEN=PLACE[2],
               AWS_CA_BUNDLE=vg.ca, HTTPS_PROXY=PROXY, AWS_PAGER="", AWS_MAX_ATTEMPTS="1",
               HOME=d)
    n0 = len(s3_gets())
    dst = os.path.join(d, "cli-big.bin")
    p = subprocess.run([AWS_CLI, "s3", "cp", "s3://bucket/big.bin", dst, "--endpoint-url",
                        "https://" + S3, "--no-progress"], env=env, capture_output=True,
                       timeout=300)
    answers.append(p.stdout + p.stderr)
    t.check(p.returncode == 0, "aws s3 cp exited %d: %r" % (p.returncode, p.stderr[-500:]))
    with open(dst, "rb") as f:
        got = f.read()
    t.check(len(got) == len(BIG), "aws s3 cp wrote %d bytes for a %d-byte object" %
            (len(got), len(BIG)))
    t.check(got == BIG, "aws s3 cp: the file differs from the object")
    t.check(len([x for x in s3_gets()[n0:] if x[4]]) >= 3, "aws s3 cp made no ranged GETs")

    # -- an HTTP/2 client: curl --http2 --aws-sigv4 -r -----------------------------------------
    out = os.path.join(d, "h2-range.bin")
    p = vg.curl(S3, "/bucket/big.bin", ["--http2", "--aws-sigv4", "aws:amz:us-east-1:s3",
                                        "--user", "%s:%s" % PLACE[:2], "-H",
                                        "x-amz-security-token: " + PLACE[2], "-r", "4096-8191",
                                        "-o", out, "-w", "%{http_code} %{http_version}"])
    t.check(p.stdout == b"206 2", "h2 ranged GET: %r %r" % (p.stdout, p.stderr[-300:]))
    with open(out, "rb") as f:
        t.check(f.read() == BIG[4096:8192], "h2 ranged GET: other bytes")

    # -- a raw ':' in a Bedrock model id, and the %3A boto3 sends -------------------------------
    for path in ("/model/x.y-1:0/invoke", "/model/anthropic.claude-v2%3A1/invoke"):
        body = b'{"prompt":"hi"}'
        r = proxied_raw(BEDROCK, b"POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json"
                        b"\r\nContent-Length: %d\r\nAuthorization: AWS4-HMAC-SHA256 Credential="
                        b"%s/20250101/us-east-1/bedrock/aws4_request, SignedHeaders=host, "
                        b"Signature=00\r\nConnection: close\r\n\r\n%s" %
                        (path.encode(), BEDROCK.encode(), len(body), PLACE[0].encode(), body))
        with lock:
            v = [x for x in verdicts if x[0] == BEDROCK][-1]
        t.check(v[3] == path, "bedrock path forwarded as %r, sent %r" % (v[3], path))
        t.check(v[1].ok, "%s: botocore refused the signature: %s" % (path, v[1].reason))
        t.check(r.status == 200, "%s: %r" % (path, r))

    # -- a bearer rule still strips Range and If-Range ------------------------------------------
    r = proxied_raw(API, b"GET /v1/file HTTP/1.1\r\nHost: %s\r\nRange: bytes=0-3\r\n"
                    b"If-Range: \"x\"\r\nAuthorization: Bearer placeholder\r\n"
                    b"Connection: close\r\n\r\n" % API.encode())
    t.check(r.status == 200 and json.loads(r.body) == {"range": [], "if_range": []},
            "bearer rule: Range/If-Range reached the upstream: %r" % r.body)
    t.check(up.requests[-1].header("Authorization") == ["Bearer " + BEARER_SECRET],
            "bearer rule: the secret was not injected")

    status = json.dumps(vg.status())
    metrics = t.metrics_text(vg)
finally:
    vg.stop()
    up.stop()

with lock:
    bad = [(h, v.reason, m, tg) for h, v, m, tg, _, _ in verdicts if not v.ok]
    sigs = [v.signature for _, v, _, _, _, _ in verdicts if v.signature]
t.check(not bad, "requests botocore refused: %r" % bad)
audit = json.dumps(t.audit_rows(vg, "blocked")) + json.dumps(t.audit_rows(vg, "routes"))
everything = {"log": vg.stderr(), "status": status, "metrics": metrics, "audit": audit,
              "answers": b"".join(answers).decode("latin-1")}
t.check_absent(everything, [SECRET, TOKEN, BEARER_SECRET] + sigs)
t.log("ok: %d signed requests verified by botocore, %d ranged" %
      (len(sigs), len([x for x in verdicts if x[4]])))
