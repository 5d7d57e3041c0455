"""sigv4ref - an independent SigV4 verifier for integration cases: what AWS does with a request,
done by botocore (Debian python3-botocore, run the case with /usr/bin/python3).

verify() takes a request as an upstream received it (method, Host, target, the header fields,
the body) and the real credentials, and recomputes the signature with botocore's SigV4Auth (or
S3SigV4Auth for s3) over exactly the fields the Authorization header says were signed, at the
time X-Amz-Date says. It also checks what botocore takes on trust: that the declared payload hash
is the hash of the bytes received, the credential scope, the clock skew, the session token.
"""
import datetime
import hashlib
import re
import sys

try:
    import botocore.auth
    import botocore.credentials
    from botocore.awsrequest import AWSRequest
    from botocore.compat import HTTPHeaders
except ImportError:
    print("SKIP: python3-botocore is not installed", flush=True)
    sys.exit(77)

AUTH_RE = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")


class Verdict:
    def __init__(self, ok, reason, signature=None, signed=()):
        self.ok, self.reason, self.signature, self.signed = ok, reason, signature, list(signed)

    def __repr__(self):
        return "<Verdict %s %s>" % (self.ok, self.reason)


def verify(method, host, target, fields, body, akid, secret, region, service, token=None,
           max_skew=300):
    """fields: [(name, value)] as received (Host among them or not). -> Verdict."""
    def values(name):
        return [v for n, v in fields if n.lower() == name]

    auth = values("authorization")
    if len(auth) != 1:
        return Verdict(False, "%d Authorization fields" % len(auth))
    m = AUTH_RE.match(auth[0])
    if not m:
        return Verdict(False, "malformed Authorization")
    got_akid, date8, got_region, got_service, signed, sig = m.groups()
    if (got_akid, got_region, got_service) != (akid, region, service):
        return Verdict(False, "credential scope %s/%s/%s" % (got_akid, got_region, got_service))
    amzdate = values("x-amz-date")
    if len(amzdate) != 1 or not amzdate[0].startswith(date8):
        return Verdict(False, "X-Amz-Date %r" % amzdate)
    when = datetime.datetime.strptime(amzdate[0], "%Y%m%dT%H%M%SZ")
    skew = abs((datetime.datetime.utcnow() - when).total_seconds())
    if skew > max_skew:
        return Verdict(False, "clock skew %ds" % skew)
    tok = values("x-amz-security-token")
    if token is not None and tok != [token]:
        return Verdict(False, "session token missing or wrong")
    if token is None and tok:
        return Verdict(False, "unexpected session token")
    names = signed.split(";")
    if "host" not in names or "x-amz-date" not in names:
        return Verdict(False, "host or x-amz-date not signed")
    for n, _ in fields:
        ln = n.lower()
        if (ln.startswith("x-amz-") or ln in ("host", "content-type")) and ln not in names:
            return Verdict(False, "%s sent but not signed" % ln)
    declared = values("x-amz-content-sha256")
    if declared and declared[0] != "UNSIGNED-PAYLOAD" and \
            declared[0] != hashlib.sha256(body).hexdigest():
        return Verdict(False, "payload hash does not match the body")
    if service == "s3" and not declared:
        return Verdict(False, "s3 without X-Amz-Content-Sha256")
    hdrs = HTTPHeaders()
    for n, v in fields:
        if n.lower() in names:
            hdrs.add_header(n, v)
    if "host" not in [n.lower() for n, _ in fields]:
        hdrs.add_header("Host", host)
    req = AWSRequest(method=method, url="https://%s%s" % (host, target), data=body)
    req.headers = hdrs
    req.context["timestamp"] = amzdate[0]
    cls = botocore.auth.S3SigV4Auth if service == "s3" else botocore.auth.SigV4Auth
    signer = cls(botocore.credentials.Credentials(akid, secret, token), service, region)
    want = signer.signature(signer.string_to_sign(req, signer.canonical_request(req)), req)
    if want != sig:
        return Verdict(False, "SignatureDoesNotMatch", sig, names)
    return Verdict(True, "ok", sig, names)
