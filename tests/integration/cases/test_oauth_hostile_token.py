#!/usr/bin/env python3
"""Hostile token-endpoint answers (SPEC §3 "OAuth 2.0 access tokens"): an access token, token
type or refresh token holding a NUL, another control character, DEL or a non-ASCII character is
refused - 502 with SPEC's Proxy-Status for the requests that need it, a /v1/status warning naming
the secret - and nothing reaches the upstream with a token cut short.

The token endpoint is the strict stub (tests/integration/lib/oauthstub.py) answering with the
hostile field as JSON escapes (json.dumps: "tok\\u0000X-Injected: x"), which cJSON decodes into
a C string that ends at the NUL. Canaries: no part of a hostile token appears in the log,
metrics, status, audit rows or any answer.

Why this can fail: a token read up to its NUL ("tok" injected as if whole, the rest of the
value silently dropped), a token type compared up to its NUL ("Bearer\\u0000x" taken as Bearer),
a truncated refresh token kept for the next fetch, or a refused answer that still lets a
request through."""
import json

import vgtest as t
from oauthstub import Client, TokenEndpoint

TOKEN_HOST = "token.hostile.test"
CASES = {  # secret name -> (client id, fields of every answer)
    "NUL_ACCESS": ("c-nul-at", {"access_token": "at-CANARY-nul\u0000X-Injected: x"}),
    "NUL_TYPE": ("c-nul-tt", {"token_type": "Bearer\u0000x"}),
    "NUL_REFRESH": ("c-nul-rt", {"refresh_token": "rt-CANARY-nul\u0000tail"}),
    "CTL_ACCESS": ("c-ctl-at", {"access_token": "at-CANARY-ctl\u0001x"}),
    "CR_ACCESS": ("c-cr-at", {"access_token": "at-CANARY-cr\r\nX-Injected: x"}),
    "DEL_ACCESS": ("c-del-at", {"access_token": "at-CANARY-del\u007fx"}),
    "UTF8_ACCESS": ("c-utf-at", {"access_token": "at-CANARY-utf-\u00e9"}),
    "CTL_REFRESH": ("c-ctl-rt", {"refresh_token": "rt-CANARY-ctl\u001fx"}),
    "UTF8_TYPE": ("c-utf-tt", {"token_type": "Bearer\u00e9"}),
}
SECRET = "cs-CANARY-hostile-0001"
PARTS = ["at-CANARY-nul", "rt-CANARY-nul", "at-CANARY-ctl", "at-CANARY-cr", "at-CANARY-del",
         "at-CANARY-utf", "rt-CANARY-ctl", "X-Injected"]


def api_host(name):
    return name.lower().replace("_", "-") + ".hostile.test"


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, [TOKEN_HOST] + [api_host(n) for n in CASES])
endpoint = TokenEndpoint(certs, [Client(cid, SECRET, "client_credentials", "basic", answer=ans)
                                 for cid, ans in CASES.values()])
api_up = t.FakeUpstream(certs["cert"], certs["key"], lambda req, ci: [
    t.resp_bytes(200, json.dumps({"you_sent": req.header("Authorization")}).encode(),
                 [("Content-Type", "application/json")])])
secrets = {"CS": {"value": SECRET}}
for name, (cid, _) in CASES.items():
    secrets[name] = {"oauth2": {"token_url": "https://%s/token" % TOKEN_HOST,
                                "grant": "client_credentials", "client_id": cid,
                                "client_secret": "CS"}}
vault = t.example_vault(secrets=secrets, hosts={}, rules=[
    {"host_pattern": api_host(n), "secret": n, "scheme": "bearer"} for n in CASES])
vg = t.Vaultgate(d, vault, pins=[endpoint.pin(TOKEN_HOST)] +
                 [api_up.pin(api_host(n)) for n in CASES],
                 upstream_ca=certs["ca"], audit="sqlite").start()
answers = []
try:
    want = ["token endpoint for %s failed" % n for n in CASES]
    t.check(t.wait_for(lambda: all(w in vg.status()["warnings"] for w in want), timeout=15),
            "status warnings: %r" % vg.status()["warnings"])
    for name in CASES:
        host = api_host(name)
        r = vg.request(host, b"GET /v1/thing HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer "
                       b"placeholder\r\nConnection: close\r\n\r\n" % host.encode())
        answers.append(r.raw_head + r.body)
        t.check(r.status == 502, "%s: %d %r (a hostile token was accepted)" % (name, r.status,
                                                                               r.body[:200]))
        t.check(r.header("Proxy-Status") == 'vaultgate; error=destination_unavailable; '
                'details="token endpoint for %s failed"' % name, "%s: Proxy-Status %r" %
                (name, r.header("Proxy-Status")))
    t.check(not api_up.requests, "requests reached the upstream: %r" %
            [(r.header("Host"), r.header("Authorization")) for r in api_up.requests])
    t.check(not endpoint.violations, "token endpoint violations: %r" % endpoint.violations)
    t.check(all(endpoint.fetches[cid] >= 1 for cid, _ in CASES.values()), "fetches %r" %
            endpoint.fetches)
    status = json.dumps(vg.status())
    metrics = t.metrics_text(vg)
finally:
    vg.stop()
    endpoint.stop()
    api_up.stop()

err = vg.stderr()
failed = [e for e in vg.events("oauth_token_failed")]
t.check(any("a NUL in the answer" in json.dumps(e) for e in failed),
        "no oauth_token_failed line names the NUL")
audit = json.dumps(t.audit_rows(vg, "blocked")) + json.dumps(t.audit_rows(vg, "routes"))
t.check_absent({"log": err, "status": status, "metrics": metrics, "audit": audit,
                "answers": b"".join(answers).decode("latin-1")}, PARTS + [SECRET])
t.log("ok: %d hostile answers refused" % len(CASES))
