#!/usr/bin/env python3
"""AWS Signature Version 4 re-signing (SPEC §3), against independent references: the upstreams
verify every request with botocore (tests/integration/lib/sigv4ref.py) from the bytes they
received and the real key, and the sandbox's clients are boto3/botocore and curl with
placeholder keys, going through vaultgate's explicit proxy (HTTP/1.1) and TLS listener (h2).

- S3 with payload signing (boto3, body buffered and hashed by vaultgate; PutObject with a
  file-like body sends Expect: 100-continue, which vaultgate answers itself), GetObject, and
  boto3's default S3 upload (UNSIGNED-PAYLOAD, Content-MD5) of 33 MiB, which streams: buffered,
  it would be 413.
- A Bedrock-style JSON POST (botocore's SigV4Auth for service bedrock, `:` in the path, sent as
  boto3 sends it) with a session token; the upstream echoes the secret key, the token and the
  Authorization it got: the sandbox sees none of them (masked).
- A boto3 Lambda Invoke whose function name is an ARN (`:` in the path, service lambda).
- 413 for a declared body over 32 MiB (no 100 Continue) and for a chunked one that grows past
  it; 501 for a presigned URL (boto3 generate_presigned_url) and a streaming signed payload.
- HTTP/2: curl --http2 --aws-sigv4 PUT and GET to an HTTP/1.1 upstream and to an HTTP/2
  upstream (Debian python3-h2); a raw HTTP/1.1 request to the HTTP/2 upstream.
- Canaries: the secret key, the session token and every signature the upstreams received appear
  in no log line, metric, status, audit row or answer to the sandbox.

Why this can fail: a wrong canonical form or payload hash (botocore disagrees), the client's
placeholder signature left in, a body hashed but not forwarded as hashed, 100-continue never
answered (boto3 stalls), buffering UNSIGNED-PAYLOAD uploads, or a reflection left unmasked."""
import hashlib
import io
import json
import os
import socket
import subprocess
import threading
import time

import vgtest as t
import sigv4ref
from h2server import H2Answer, H2Upstream, need_h2

need_h2()
os.environ.update(AWS_CONFIG_FILE="/dev/null", AWS_SHARED_CREDENTIALS_FILE="/dev/null",
                  AWS_EC2_METADATA_DISABLED="true")
for v in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
          "HTTPS_PROXY", "https_proxy", "AWS_CA_BUNDLE"):
    os.environ.pop(v, None)
import boto3  # noqa: E402
import botocore.auth  # noqa: E402
import botocore.credentials  # noqa: E402
import botocore.httpsession  # noqa: E402
from botocore.awsrequest import AWSRequest  # noqa: E402
from botocore.config import Config  # noqa: E402

AKID = "AKIAVGTESTREALKEY001"
SECRET = "wJalrCANARYsecretKEY/0001+vaultgateTESTzz"
TOKEN = "IQoJb3JpZ2luCANARYsessionTOKEN/0002+vaultgate=="
PLACE = ("AKIAPLACEHOLDER00000", "placeholder-secret-key", "placeholder-session-token")
S3, BEDROCK, LAMBDA, H2S3 = ("s3.sigv4.test", "bedrock-runtime.sigv4.test", "lambda.sigv4.test",
                             "h2s3.sigv4.test")
SERVICE = {S3: ("s3", TOKEN), BEDROCK: ("bedrock", TOKEN), LAMBDA: ("lambda", None),
           H2S3: ("s3", None)}

verdicts = []   # (host, Verdict)
store = {}
lock = threading.Lock()


def check_request(host, method, target, fields, body):
    service, token = SERVICE[host]
    v = sigv4ref.verify(method, host, target, fields, body, AKID, SECRET, "us-east-1", service,
                        token)
    raw = repr(fields).encode() + body
    for p in PLACE:
        if p.encode() in raw:
            v = sigv4ref.Verdict(False, "placeholder %r reached the upstream" % p, v.signature)
    with lock:
        verdicts.append((host, v, method, target))
    return v


def s3_answer(method, target, body):
    if method == "PUT":
        with lock:
            store[target] = body
        return 200, [("ETag", '"%s"' % hashlib.md5(body).hexdigest())], b""
    with lock:
        data = store.get(target)
    if data is None:
        return 404, [("Content-Type", "application/xml")], b"<Error><Code>NoSuchKey</Code></Error>"
    return 200, [("Content-Type", "application/octet-stream")], data


def h1_handler(req, ci):
    host = req.header("Host")[0]
    v = check_request(host, req.method, req.target, req.fields, req.body)
    if not v.ok:
        return [t.resp_bytes(403, ("<Error><Code>SignatureDoesNotMatch</Code><Message>%s"
                                   "</Message></Error>" % v.reason).encode(),
                             [("Content-Type", "application/xml")], reason="Forbidden")]
    if host == S3:
        st, hdrs, body = s3_answer(req.method, req.target, req.body)
        return [t.resp_bytes(st, body, hdrs)]
    if host == BEDROCK:
        # an upstream that echoes what it got: the sandbox must see none of it
        echo = {"completion": "hello from bedrock", "authorization": req.header("Authorization"),
                "token": req.header("X-Amz-Security-Token"), "key": SECRET}
        return [t.resp_bytes(200, json.dumps(echo).encode(), [
            ("Content-Type", "application/json"), ("X-Echo-Token", TOKEN),
            ("X-Echo-Signature", v.signature)])]
    return [t.resp_bytes(200, b'{"ok":true}', [("Content-Type", "application/json"),
                                               ("X-Amz-Executed-Version", "$LATEST")])]


def h2_handler(r):
    hd = dict(r.headers)
    fields = [(n, v) for n, v in r.headers if not n.startswith(":")]
    fields.append(("host", hd[":authority"]))
    v = check_request(hd[":authority"], hd[":method"], hd[":path"], fields, r.body)
    if not v.ok:
        return H2Answer(403, [("content-type", "text/plain")], [v.reason.encode()])
    st, hdrs, body = s3_answer(hd[":method"], hd[":path"], r.body)
    return H2Answer(st, [(n.lower(), x) for n, x in hdrs], [body] if body else [])


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, [S3, BEDROCK, LAMBDA, H2S3])
up = t.FakeUpstream(certs["cert"], certs["key"], h1_handler, continue100=True)
up2 = H2Upstream(certs["cert"], certs["key"], h2_handler)


def rule(host, service, token):
    r = {"host_pattern": host, "secret": "AWS_SECRET_ACCESS_KEY", "scheme": "sigv4",
         "access_key_id": AKID, "region": "us-east-1", "service": service}
    if token:
        r["session_token"] = "AWS_SESSION_TOKEN"
    return r


vault = t.example_vault(
    secrets={"AWS_SECRET_ACCESS_KEY": {"value": SECRET}, "AWS_SESSION_TOKEN": {"value": TOKEN}},
    rules=[rule(h, s, tok) for h, (s, tok) in SERVICE.items()], hosts={})
vg = t.Vaultgate(d, vault, pins=[up.pin(h) for h in (S3, BEDROCK, LAMBDA)] + [up2.pin(H2S3)],
                 upstream_ca=certs["ca"], proxy=True, audit="sqlite").start()
PROXY = "http://127.0.0.1:%d" % vg.proxy_port
answers = []  # every byte the sandbox got back


def boto(service, endpoint, **cfg):
    s = boto3.session.Session(aws_access_key_id=PLACE[0], aws_secret_access_key=PLACE[1],
                              aws_session_token=PLACE[2], region_name="us-east-1")
    return s.client(service, endpoint_url="https://" + endpoint, verify=vg.ca,
                    config=Config(proxies={"https": PROXY}, retries={"max_attempts": 1},
                                  connect_timeout=10, read_timeout=60, **cfg))


def last_verdict(host):
    with lock:
        got = [v for h, v, _, _ in verdicts if h == host]
    t.check(got, "%s: the upstream got nothing" % host)
    t.check(got[-1].ok, "%s: botocore refused the signature: %s" % (host, got[-1].reason))
    return got[-1]


def proxied_raw(host, head, body_parts=(), wait_continue=False):
    """A raw HTTP/1.1 request through CONNECT: returns (interim 100 seen, response)."""
    raw = socket.create_connection(("127.0.0.1", vg.proxy_port), timeout=30)
    raw.sendall(b"CONNECT %s:443 HTTP/1.1\r\nHost: %s:443\r\n\r\n" % (host.encode(),
                                                                        host.encode()))
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += raw.recv(4096)
    s = vg.client_ctx().wrap_socket(raw, server_hostname=host)
    s.sendall(head)
    saw100 = False
    if wait_continue:
        s.settimeout(5)
        first = s.recv(65536)
        saw100 = first.startswith(b"HTTP/1.1 100 Continue\r\n")
        if not saw100:
            r, _ = t.parse_response(first, reader=lambda: s.recv(65536))
            s.close()
            return False, r
        first = first[first.index(b"\r\n\r\n") + 4:]
    else:
        first = b""
    try:
        for p in body_parts:
            s.sendall(p)
    except OSError:
        pass
    s.settimeout(60)
    out = first + t.read_until_close(s)
    s.close()
    answers.append(out)
    return saw100, t.parse_response(out)[0]


try:
    # -- S3 through boto3, payload signed: buffered and hashed by vaultgate, 100-continue --------
    s3 = boto("s3", S3, s3={"addressing_style": "path", "payload_signing_enabled": True})
    data = os.urandom(3 * 1024 * 1024 + 17)
    r = s3.put_object(Bucket="bucket", Key="dir/obj with space:1.bin", Body=io.BytesIO(data))
    t.check(r["ResponseMetadata"]["HTTPStatusCode"] == 200, "PutObject: %r" % r)
    v = last_verdict(S3)
    with lock:
        put = [x for x in verdicts if x[2] == "PUT"][-1]
    t.check(put[3] == "/bucket/dir/obj%20with%20space%3A1.bin", "S3 key encoding: %r" % put[3])
    t.check(store.get(put[3]) == data, "the stored object is not the body that was hashed")
    t.check(up.requests[-1].header("X-Amz-Content-Sha256") == [hashlib.sha256(data).hexdigest()],
            "x-amz-content-sha256 is not the body's hash")
    t.check(up.requests[-1].header("Expect") == [], "Expect forwarded after vaultgate answered it")
    got = s3.get_object(Bucket="bucket", Key="dir/obj with space:1.bin")["Body"].read()
    t.check(got == data, "GetObject returned other bytes")
    last_verdict(S3)

    # -- boto3's default upload: UNSIGNED-PAYLOAD (Content-MD5 over TLS) streams, even 33 MiB ---
    s3u = boto("s3", S3, s3={"addressing_style": "path"})
    big = os.urandom(33 * 1024 * 1024)
    r = s3u.put_object(Bucket="bucket", Key="big", Body=big)
    t.check(r["ResponseMetadata"]["HTTPStatusCode"] == 200, "unsigned PutObject: %r" % r)
    last_verdict(S3)
    t.check(up.requests[-1].header("X-Amz-Content-Sha256") == ["UNSIGNED-PAYLOAD"],
            "UNSIGNED-PAYLOAD not kept")
    t.check(up.requests[-1].header("Expect") == ["100-continue"],
            "a streamed body's Expect is the upstream's to answer")
    t.check(store.get("/bucket/big") == big, "the streamed body differs")

    # -- Bedrock-style JSON POST (':' in the path), a session token, an echoing upstream --------
    session = botocore.httpsession.URLLib3Session(verify=vg.ca, proxies={"https": PROXY},
                                                  timeout=30)
    body = json.dumps({"prompt": "\n\nHuman: hi\n\nAssistant:", "max_tokens_to_sample": 5})
    req = AWSRequest(method="POST", data=body.encode(),
                     url="https://%s/model/anthropic.claude-v2%%3A1/invoke" % BEDROCK,
                     headers={"Content-Type": "application/json", "Accept": "application/json"})
    botocore.auth.SigV4Auth(botocore.credentials.Credentials(*PLACE), "bedrock",
                            "us-east-1").add_auth(req)
    resp = session.send(req.prepare())
    answers.append(repr(resp.headers).encode() + resp.content)
    t.check(resp.status_code == 200, "Bedrock-style POST: %d %r" % (resp.status_code,
                                                                   resp.content[:300]))
    v = last_verdict(BEDROCK)
    t.check(up.requests[-1].target == "/model/anthropic.claude-v2%3A1/invoke", "bedrock path")
    echo = json.loads(resp.content)
    t.check(echo["completion"] == "hello from bedrock", "bedrock answer: %r" % echo)
    t.check(echo["key"] == "*" * len(SECRET), "the secret key came back unmasked")
    t.check(echo["token"] == ["*" * len(TOKEN)], "the session token came back unmasked: %r" %
            echo["token"])
    t.check(v.signature not in echo["authorization"][0], "the signature came back unmasked")
    t.check(resp.headers["X-Echo-Token"] == "*" * len(TOKEN), "token in a response header")
    t.check(resp.headers["X-Echo-Signature"] == "*" * 64, "signature in a response header")

    # -- a real boto3 client: Lambda Invoke with an ARN (':' in the path) ----------------------
    lam = boto("lambda", LAMBDA)
    r = lam.invoke(FunctionName="arn:aws:lambda:us-east-1:123456789012:function:fn",
                   Payload=b'{"x":1}')
    t.check(r["StatusCode"] == 200 and r["Payload"].read() == b'{"ok":true}', "Invoke: %r" % r)
    last_verdict(LAMBDA)
    t.check("%3A" in up.requests[-1].target, "Invoke path: %r" % up.requests[-1].target)

    # -- 100-continue answered by vaultgate, before the upstream is even asked -----------------
    n = len(up.requests)
    payload = b"x" * 1000
    saw100, r = proxied_raw(S3, b"PUT /bucket/expect HTTP/1.1\r\nHost: %s\r\nContent-Length: %d"
                            b"\r\nExpect: 100-continue\r\nX-Amz-Content-Sha256: 0\r\n"
                            b"Connection: close\r\n\r\n" % (S3.encode(), len(payload)),
                            [payload], wait_continue=True)
    t.check(saw100, "no 100 Continue for a buffered body")
    t.check(r.status == 200 and len(up.requests) == n + 1, "after 100: %r" % r)
    last_verdict(S3)

    # -- 413: a declared body over 32 MiB (answered at once), a chunked one growing past it ----
    n = len(up.requests)
    saw100, r = proxied_raw(S3, b"PUT /bucket/huge HTTP/1.1\r\nHost: %s\r\nContent-Length: "
                            b"33554433\r\nExpect: 100-continue\r\n\r\n" % S3.encode(),
                            wait_continue=True)
    t.check(not saw100 and r.status == 413, "declared 32 MiB + 1: %r" % r)
    t.check("error=http_request_error" in r.header("Proxy-Status"), "413 Proxy-Status")
    chunk = b"y" * (1024 * 1024)
    parts = [b"%x\r\n%s\r\n" % (len(chunk), chunk)] * 33 + [b"0\r\n\r\n"]
    _, r = proxied_raw(S3, b"PUT /bucket/huge HTTP/1.1\r\nHost: %s\r\nTransfer-Encoding: chunked"
                       b"\r\n\r\n" % S3.encode(), parts)
    t.check(r.status == 413, "chunked past 32 MiB: %r" % r)
    t.check(len(up.requests) == n, "an over-large body reached the upstream")
    # exactly 32 MiB is fine
    exact = b"z" * (32 * 1024 * 1024)
    r = s3.put_object(Bucket="bucket", Key="exact", Body=exact)
    t.check(r["ResponseMetadata"]["HTTPStatusCode"] == 200 and store.get("/bucket/exact") == exact,
            "a 32 MiB signed body")
    last_verdict(S3)

    # -- 501: presigned URLs and streaming signed payloads --------------------------------------
    s3v4 = boto("s3", S3, s3={"addressing_style": "path"}, signature_version="s3v4")
    for client, marker in ((s3v4, "X-Amz-Signature="), (s3u, "AWSAccessKeyId=")):
        n = len(up.requests)
        url = client.generate_presigned_url("get_object", Params={"Bucket": "bucket",
                                                                  "Key": "big"})
        t.check(marker in url, "boto3 gave no presigned URL: %s" % url)
        r = session.send(AWSRequest(method="GET", url=url).prepare())
        answers.append(r.content)
        t.check(r.status_code == 501 and "presigned" in r.headers.get("Proxy-Status", ""),
                "presigned URL: %d %r" % (r.status_code, r.headers))
        t.check(len(up.requests) == n, "a presigned URL reached the upstream")
    _, r = proxied_raw(S3, b"PUT /bucket/s HTTP/1.1\r\nHost: %s\r\nContent-Encoding: aws-chunked"
                       b"\r\nX-Amz-Content-Sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD\r\n"
                       b"X-Amz-Decoded-Content-Length: 3\r\nContent-Length: 90\r\n\r\n" %
                       S3.encode(), [b"3;chunk-signature=" + b"0" * 64 + b"\r\nabc\r\n"])
    t.check(r.status == 501 and "streaming" in r.header("Proxy-Status"), "streaming: %r" % r)
    t.check(len(up.requests) == n, "a refused request reached the upstream")

    # -- HTTP/2 client (curl --aws-sigv4), to an HTTP/1.1 and to an HTTP/2 upstream -----------
    src = os.path.join(d, "h2-upload.bin")
    with open(src, "wb") as f:
        f.write(os.urandom(200000))
    for host in (S3, H2S3):
        base = ["--http2", "--aws-sigv4", "aws:amz:us-east-1:s3", "--user",
                "%s:%s" % PLACE[:2], "-H", "x-amz-security-token: " + PLACE[2]]
        p = vg.curl(host, "/bucket/h2obj", base + ["-T", src, "-o", "/dev/null", "-w",
                                                   "%{http_code} %{http_version}"])
        t.check(p.stdout == b"200 2", "h2 PUT %s: %r %r" % (host, p.stdout, p.stderr[-300:]))
        last_verdict(host)
        p = vg.curl(host, "/bucket/h2obj", base + ["-o", os.path.join(d, "h2-got.bin"), "-w",
                                                   "%{http_code} %{http_version}"])
        t.check(p.stdout == b"200 2", "h2 GET %s: %r" % (host, p.stdout))
        with open(os.path.join(d, "h2-got.bin"), "rb") as f, open(src, "rb") as g:
            t.check(f.read() == g.read(), "h2 %s: the object differs" % host)
        last_verdict(host)
    t.check(up2.requests and not up2.errors, "the HTTP/2 upstream: %r" % up2.errors)
    # HTTP/1.1 client to the HTTP/2 upstream, buffered body
    s3h2 = boto("s3", H2S3, s3={"addressing_style": "path", "payload_signing_enabled": True})
    r = s3h2.put_object(Bucket="bucket", Key="from-h1", Body=io.BytesIO(b"h1 to h2"))
    t.check(r["ResponseMetadata"]["HTTPStatusCode"] == 200, "h1 -> h2 upstream PUT")
    last_verdict(H2S3)
    t.check(store.get("/bucket/from-h1") == b"h1 to h2", "h1 -> h2 body")

    status = json.dumps(vg.status())
    metrics = t.metrics_text(vg)
finally:
    vg.stop()
    up.stop()
    up2.stop()

with lock:
    bad = [(h, v.reason) for h, v, _, _ in verdicts if not v.ok]
    sigs = [v.signature for _, v, _, _ in verdicts if v.signature]
t.check(not bad, "requests botocore refused: %r" % bad)
t.check(len(sigs) >= 12, "too few signed requests seen: %d" % len(sigs))
audit = json.dumps(t.audit_rows(vg, "blocked")) + json.dumps(t.audit_rows(vg, "routes"))
err = vg.stderr()
everything = {"log": err, "status": status, "metrics": metrics, "audit": audit,
              "answers": b"".join(answers).decode("latin-1")}
t.check_absent(everything, [SECRET, TOKEN] + sigs)
t.check("sigv4_body_too_large" in err and "sigv4_presigned" in err and "sigv4_streaming" in err,
        "refusal reasons missing from the request lines")
t.log("ok: %d requests verified by botocore" % len(sigs))
