#!/usr/bin/env python3
"""OAuth 2.0 access tokens kept fresh by vaultgate (SPEC §3), against a token endpoint stub over
TLS (tests/integration/lib/oauthstub.py) that checks each grant's form body and client
authentication strictly, issues short-lived tokens, rotates refresh tokens, fails on demand and
counts fetches.

- client_credentials with Basic client authentication, scope and audience; 24 concurrent first
  requests over two workers wait for one fetch (single flight) and all carry its token; the
  token is refreshed before it expires, inside the test, and requests never wait for that.
- refresh_token with client_secret in the body: the refresh token rotates, and the next fetch
  presents the rotated one (the stub refuses a reused one); a public client (no secret).
- The upstream answers 401 to a token: the 401 reaches the sandbox, and the next request carries
  a new token.
- A token endpoint that fails: 502 with SPEC's Proxy-Status at once, a /v1/status warning naming
  the secret (degraded), retries with backoff, recovery, the warning gone.
- An HTTP/2 client (curl --http2) gets the token too, and so does an HTTP/2 upstream.
- The token endpoint's route is recorded (egress_route_log); canaries: no access token, refresh
  token or client secret in the log, metrics, status, audit rows or any answer to the sandbox
  (the upstream echoes the Authorization it got: masked).

Why this can fail: one fetch per worker or per request, a refresh that never happens (requests
get 502 or the old token once it expired), a rotated refresh token dropped, a 401 ignored, a
failing endpoint answered by waiting or hanging, or a value in a log line."""
import json
import socket
import threading
import time

import vgtest as t
from h2server import H2Answer, H2Upstream, need_h2
from oauthstub import Client, TokenEndpoint

need_h2()

CC_SECRET = "cs-CANARY-client-credentials-0001"
RT_SECRET = "cs-CANARY-refresh-client-0002"
RT0 = "rt-CANARY-initial-0003"
PUB_RT0 = "rt-CANARY-public-initial-0004"
FAIL_SECRET = "cs-CANARY-failing-0005"
TOKEN_HOST = "token.oauth.test"
CC, RT, PUB, FAIL = "api-cc.oauth.test", "api-rt.oauth.test", "api-pub.oauth.test", \
    "api-fail.oauth.test"
H2 = "api-h2.oauth.test"  # an HTTP/2 upstream

t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, [TOKEN_HOST, CC, RT, PUB, FAIL, H2])
clients = [
    Client("cc-client", CC_SECRET, "client_credentials", "basic", scope="read write",
           audience="https://api-cc.oauth.test", lifetime=8),
    Client("rt-client", RT_SECRET, "refresh_token", "post", scope="offline", lifetime=4,
           refresh=RT0),
    Client("pub-client", None, "refresh_token", "public", lifetime=3600, refresh=PUB_RT0),
    Client("fail-client", FAIL_SECRET, "client_credentials", "basic", lifetime=3600),
]
endpoint = TokenEndpoint(certs, clients)
endpoint.set_delay("cc-client", 1.5)  # the first fetch is slow: the first requests must wait
endpoint.fail("fail-client", 3, 400)  # fails three times, then recovers
reject = set()  # tokens the API answers 401 to


def api(req, ci):
    auth = (req.header("X-Api-Token") or req.header("Authorization") or [""])[0]
    status = 401 if any(tok in auth for tok in reject) else 200
    return [t.resp_bytes(status, json.dumps({"you_sent": auth}).encode(),
                         [("Content-Type", "application/json"), ("X-Echo", auth)])]


api_up = t.FakeUpstream(certs["cert"], certs["key"], api)
h2_up = H2Upstream(certs["cert"], certs["key"], lambda r: H2Answer(
    200, [("content-type", "application/json")], [json.dumps(dict(r.headers)).encode()]))


def oauth2(client_id, grant, secret=None, refresh=None, auth=None, scope=None, audience=None):
    o = {"token_url": "https://%s/token" % TOKEN_HOST, "grant": grant, "client_id": client_id}
    for k, v in (("client_secret", secret), ("refresh_token", refresh), ("client_auth", auth),
                 ("scope", scope), ("audience", audience)):
        if v is not None:
            o[k] = v
    return {"oauth2": o}


vault = t.example_vault(
    secrets={
        "CC_TOKEN": oauth2("cc-client", "client_credentials", "CC_SECRET", scope="read write",
                           audience="https://api-cc.oauth.test"),
        "CC_SECRET": {"value": CC_SECRET},
        "RT_TOKEN": oauth2("rt-client", "refresh_token", "RT_SECRET", "RT_REFRESH", "post",
                           scope="offline"),
        "RT_SECRET": {"value": RT_SECRET},
        "RT_REFRESH": {"value": RT0},
        "PUB_TOKEN": oauth2("pub-client", "refresh_token", refresh="PUB_REFRESH"),
        "PUB_REFRESH": {"value": PUB_RT0},
        "FAIL_TOKEN": oauth2("fail-client", "client_credentials", "FAIL_SECRET"),
        "FAIL_SECRET": {"value": FAIL_SECRET},
    },
    rules=[{"host_pattern": CC, "secret": "CC_TOKEN", "scheme": "bearer"},
           {"host_pattern": RT, "secret": "RT_TOKEN", "scheme": "header", "name": "X-Api-Token"},
           {"host_pattern": PUB, "secret": "PUB_TOKEN", "scheme": "bearer"},
           {"host_pattern": FAIL, "secret": "FAIL_TOKEN", "scheme": "bearer"},
           {"host_pattern": H2, "secret": "CC_TOKEN", "scheme": "bearer"}],
    hosts={})
vg = t.Vaultgate(d, vault, pins=[endpoint.pin(TOKEN_HOST)] + [api_up.pin(h) for h in
                                                                  (CC, RT, PUB, FAIL)] +
                 [h2_up.pin(H2)],
                 upstream_ca=certs["ca"], threads=2, audit="sqlite").start()
answers = []


def get(host, path="/v1/thing"):
    r = vg.request(host, b"GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer placeholder\r\n"
                   b"Connection: close\r\n\r\n" % (path.encode(), host.encode()))
    answers.append(r.raw_head + r.body)
    return r


def sent_token(host):
    """The credential the API upstream received last for host."""
    reqs = [r for r in api_up.requests if r.header("Host") == [host]]
    t.check(reqs, "%s: nothing reached the upstream" % host)
    v = (reqs[-1].header("X-Api-Token") or reqs[-1].header("Authorization"))[0]
    return v.split(" ", 1)[1] if v.startswith("Bearer ") else v


try:
    # -- a failing token endpoint: 502 at once and a status warning ------------------------
    t.check(t.wait_for(lambda: "token endpoint for FAIL_TOKEN failed" in vg.status()["warnings"],
                       timeout=5), "no status warning for the failing endpoint")
    t0 = time.monotonic()
    r = get(FAIL)
    t.check(r.status == 502 and time.monotonic() - t0 < 2, "failing endpoint: %r" % r)
    t.check(r.header("Proxy-Status") == 'vaultgate; error=destination_unavailable; '
            'details="token endpoint for FAIL_TOKEN failed"', "Proxy-Status %r" %
            r.header("Proxy-Status"))

    # -- concurrent first requests: one fetch, every request waits for it ------------------
    results, n0 = [], len(answers)

    def one():
        try:
            results.append(get(CC).status)
        except Exception as e:  # noqa: BLE001 - reported below
            results.append(repr(e))

    threads = [threading.Thread(target=one) for _ in range(24)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(30)
    t.check(results == [200] * 24, "concurrent first requests: %r" % results)
    t.check(endpoint.fetches["cc-client"] == 1, "single flight: %d fetches for 24 requests" %
            endpoint.fetches["cc-client"])
    first = sent_token(CC)
    t.check(first.startswith("at-cc-client-1-"), "first token %r" % first)
    t.check(all(r.header("Authorization") == ["Bearer " + first] for r in api_up.requests),
            "not every request carried the one token")
    t.check(all(first.encode() not in a for a in answers), "the echoed token was not masked")
    t.check(all(b"Bearer " + b"*" * len(first) in a for a in answers[n0:n0 + 24]),
            "no masked echo")

    # -- refreshed before expiry (8 s lifetime: refreshed at 4 s), requests never wait ------
    endpoint.set_delay("cc-client", 0)
    t.check(t.wait_for(lambda: endpoint.fetches["cc-client"] >= 2, timeout=12),
            "no refresh before expiry")
    time.sleep(0.2)
    r = get(CC)
    t.check(r.status == 200 and sent_token(CC).startswith("at-cc-client-2-"),
            "after the refresh: %r %r" % (r, sent_token(CC)))

    # -- refresh_token grant, client_secret in the body, rotation ---------------------------
    r = get(RT)
    t.check(r.status == 200 and sent_token(RT).startswith("at-rt-client-"), "rt: %r" % r)
    t.check(t.wait_for(lambda: len(clients[1].refresh_seen) >= 3, timeout=10),
            "rt: no refreshes: %r" % clients[1].refresh_seen)
    seen = clients[1].refresh_seen
    t.check(seen[0] == RT0 and seen[1] == "rt-rt-client-1-CANARY-rotated" and
            seen[2] == "rt-rt-client-2-CANARY-rotated", "rotation: %r" % seen)
    r = get(RT)
    t.check(r.status == 200, "rt after rotation: %r" % r)
    # a public client
    r = get(PUB)
    t.check(r.status == 200 and sent_token(PUB).startswith("at-pub-client-1-"), "public: %r" % r)

    # -- 401: that request's answer stands, the next one carries a new token ----------------
    before = endpoint.fetches["pub-client"]
    bad = sent_token(PUB)
    reject.add(bad)
    r = get(PUB)
    t.check(r.status == 401, "401 passed on: %r" % r)
    t.check(bad.encode() not in r.body, "the rejected token came back unmasked")
    r = get(PUB)
    t.check(r.status == 200 and sent_token(PUB) != bad and
            endpoint.fetches["pub-client"] == before + 1, "after 401: %r %d" %
            (r, endpoint.fetches["pub-client"]))

    # -- the failing endpoint recovers (retried with backoff): the warning goes ----------
    t.check(t.wait_for(lambda: "token endpoint for FAIL_TOKEN failed" not in
                       vg.status()["warnings"], timeout=20), "no recovery")
    t.check(endpoint.fetches["fail-client"] == 4, "backoff: %d fetches" %
            endpoint.fetches["fail-client"])
    r = get(FAIL)
    t.check(r.status == 200 and sent_token(FAIL).startswith("at-fail-client-1-"),
            "recovered: %r" % r)

    # -- HTTP/2 client ---------------------------------------------------------------------
    p = vg.curl(CC, "/h2", ["--http2", "-H", "Authorization: Bearer placeholder", "-w",
                            "\n%{http_code} %{http_version}"])
    out = p.stdout.decode()
    answers.append(p.stdout)
    t.check(out.endswith("\n200 2"), "h2: %r %r" % (out, p.stderr[-200:]))
    t.check(sent_token(CC).startswith("at-cc-client-"), "h2: token")
    # an HTTP/2 upstream, from an HTTP/1.1 client and an HTTP/2 one
    r = get(H2)
    p = vg.curl(H2, "/h2up", ["--http2", "-w", "\n%{http_code} %{http_version}"])
    answers.append(p.stdout)
    t.check(r.status == 200 and p.stdout.decode().endswith("\n200 2"), "h2 upstream: %r" % r)
    got = [q.header("authorization") for q in h2_up.requests]
    t.check(len(got) == 2 and all(g and g[0].startswith("Bearer at-cc-client-") for g in got),
            "h2 upstream tokens: %d requests" % len(got))

    status = json.dumps(vg.status())
    metrics = t.metrics_text(vg)
finally:
    vg.stop()
    endpoint.stop()
    api_up.stop()
    h2_up.stop()

t.check(not endpoint.violations, "the token endpoint saw: %r" % endpoint.violations)
routes = {(row["host"], row["route"]) for row in t.audit_rows(vg, "routes")}
t.check((TOKEN_HOST, "direct") in routes, "token endpoint route not recorded: %r" % routes)
t.check(not any(row["host"] == TOKEN_HOST for row in t.audit_rows(vg, "blocked")),
        "the token endpoint counted as a refusal")
err = vg.stderr()
audit = json.dumps(t.audit_rows(vg, "blocked")) + json.dumps(t.audit_rows(vg, "routes"))
canaries = [CC_SECRET, RT_SECRET, RT0, PUB_RT0, FAIL_SECRET] + endpoint.issued
texts = {"log": err, "status": status, "metrics": metrics, "audit": audit,
         "answers": b"".join(answers).decode("latin-1")}
t.check_absent(texts, canaries)
oks = [e for e in vg.events("oauth_token")]
fails = [e for e in vg.events("oauth_token_failed")]
t.check(len(fails) == 3 and all(e.get("secret") == "FAIL_TOKEN" and
                                e.get("reason") == "oauth_http_error" for e in fails),
        "failure lines: %r" % fails)
t.check("temporarily_unavailable" in fails[0].get("detail", ""), "no OAuth error code logged")
t.check(all(e.get("route") == "direct" and e.get("host") == TOKEN_HOST for e in oks),
        "oauth_token lines: %r" % oks[:2])
t.log("ok: %d token fetches" % sum(endpoint.fetches.values()))
