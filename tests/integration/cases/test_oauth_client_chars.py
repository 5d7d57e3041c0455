#!/usr/bin/env python3
"""OAuth client ids and secrets with the characters RFC 6749 allows (SPEC §3 "OAuth 2.0 access
tokens": client_id is VSCHAR, 0x20-0x7E): client_id "acc:client id+1" and a client secret
holding ':', '+', '%' and spaces, for both client authentications, each against its own strict
token endpoint (tests/integration/lib/oauthstub.py), which form-decodes the Basic credentials
and the body as RFC 6749 §2.3.1 and Appendix B say and refuses text that is not strictly
form-encoded (a raw space, ':' or '+' meant literally).

- client_auth basic: Authorization: Basic base64(form(id) ":" form(secret)); nothing in the body.
- client_auth post: client_id and client_secret form-encoded in the body.
Both: one fetch, no violation, the token injected into the request to the API.

Why this can fail: the vault refusing the id (vaultgate does not start), the id or secret sent
raw (the stub splits the Basic credentials at the id's ':' or reads '+' as a space) or encoded
twice, or credentials in the wrong place."""
import json

import vgtest as t
from oauthstub import Client, TokenEndpoint, form_decode

CLIENT_ID = "acc:client id+1"
SECRET = "cs-CANARY:with+plus %25 and space"
TB, TP = "token-basic.chars.test", "token-post.chars.test"
AB, AP = "api-basic.chars.test", "api-post.chars.test"

# the stub is strict: raw reserved bytes are refused, the strict encoding decodes back
t.check(form_decode("acc:client id+1") is None and form_decode("acc%3Aclient id") is None,
        "the stub accepts raw ':' or space")
t.check(form_decode("acc%3Aclient+id%2B1") == CLIENT_ID, "the stub's form decoding")

t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, [TB, TP, AB, AP])
ends = {TB: TokenEndpoint(certs, [Client(CLIENT_ID, SECRET, "client_credentials", "basic")]),
        TP: TokenEndpoint(certs, [Client(CLIENT_ID, SECRET, "client_credentials", "post")])}
api_up = t.FakeUpstream(certs["cert"], certs["key"], lambda req, ci: [
    t.resp_bytes(200, b'{"ok":true}', [("Content-Type", "application/json")])])


def source(token_host, auth):
    return {"oauth2": {"token_url": "https://%s/token" % token_host,
                       "grant": "client_credentials", "client_id": CLIENT_ID,
                       "client_secret": "CS", "client_auth": auth}}


vault = t.example_vault(
    secrets={"CS": {"value": SECRET}, "BASIC_TOKEN": source(TB, "basic"),
             "POST_TOKEN": source(TP, "post")},
    rules=[{"host_pattern": AB, "secret": "BASIC_TOKEN", "scheme": "bearer"},
           {"host_pattern": AP, "secret": "POST_TOKEN", "scheme": "bearer"}], hosts={})
vg = t.Vaultgate(d, vault, pins=[ends[TB].pin(TB), ends[TP].pin(TP), api_up.pin(AB),
                                 api_up.pin(AP)], upstream_ca=certs["ca"]).start()
answers = []
try:
    for api, th in ((AB, TB), (AP, TP)):
        r = vg.request(api, b"GET /v1/x HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer "
                       b"placeholder\r\nConnection: close\r\n\r\n" % api.encode())
        answers.append(r.raw_head + r.body)
        e = ends[th]
        t.check(not e.violations, "%s: token endpoint violations %r" % (th, e.violations))
        t.check(r.status == 200, "%s: %d %r" % (api, r.status, r.body[:200]))
        t.check(e.fetches[CLIENT_ID] == 1, "%s: %d fetches" % (th, e.fetches[CLIENT_ID]))
        got = [q.header("Authorization") for q in api_up.requests if q.header("Host") == [api]]
        t.check(got and got[-1] == ["Bearer " + e.issued[0]], "%s: token not injected" % api)
        tok = e.up.requests[-1]
        if th == TB:
            t.check(tok.header("Authorization") and b"client_id" not in tok.body,
                    "basic: credentials not in Authorization alone")
        else:
            t.check(not tok.header("Authorization") and b"client_secret=" in tok.body,
                    "post: credentials not in the body")
    status = json.dumps(vg.status())
finally:
    vg.stop()
    api_up.stop()
    for e in ends.values():
        e.stop()

issued = [x for e in ends.values() for x in e.issued]
t.check_absent({"log": vg.stderr(), "status": status,
                "answers": b"".join(answers).decode("latin-1")}, [SECRET] + issued)
t.log("ok: client_id %r with basic and post" % CLIENT_ID)
