#!/usr/bin/env python3
"""Every value a secret has held during the run is masked until the process exits (SPEC §4
"Reflection", §3 OAuth): an OAuth access token dropped after a 401, one replaced by a refresh,
and a static value replaced by a reload (SIGHUP). The upstream plays a debug endpoint that shows
every Authorization it was sent so far, earlier callers' included, in its body (JSON) and in a
header; the sandbox provokes the rotation itself with an endpoint that answers 401.

Why this can fail: a masker built from the current value alone hands back the token it
replaced, which is still valid where it was issued."""
import json
import os
import signal
import time

import vgtest as t
from oauthstub import Client, TokenEndpoint

TOKEN_HOST = "token.hist.test"
DROP, REFRESH, STATIC = "api-drop.hist.test", "api-refresh.hist.test", "api-static.hist.test"
CS1, CS2 = "cs-CANARY-history-drop-0001", "cs-CANARY-history-refresh-0002"
V1, V2 = "sk-CANARY-static-before-reload-0003", "sk-CANARY-static-after-reload-00004"

t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, [TOKEN_HOST, DROP, REFRESH, STATIC])
endpoint = TokenEndpoint(certs, [Client("drop-client", CS1, lifetime=3600),
                                 Client("refresh-client", CS2, lifetime=2)])
seen = {}  # host -> every Authorization the upstream was sent, in order


def api(req, ci):
    host = req.header("Host")[0]
    auth = (req.header("Authorization") or [""])[0]
    seen.setdefault(host, []).append(auth)
    if req.target == "/401":
        return [t.resp_bytes(401, b"token rejected")]
    if req.target == "/history":
        earlier = seen[host][:-1]
        return [t.resp_bytes(200, json.dumps({"earlier": earlier}).encode(),
                             [("Content-Type", "application/json"),
                              ("X-Earlier", " | ".join(earlier))])]
    return [t.resp_bytes(200, b"ok")]


api_up = t.FakeUpstream(certs["cert"], certs["key"], api)


def oauth2(client_id, secret_name):
    return {"oauth2": {"token_url": "https://%s/token" % TOKEN_HOST,
                       "grant": "client_credentials", "client_id": client_id,
                       "client_secret": secret_name}}


def vault(static_value):
    return t.example_vault(
        secrets={"DROP_TOKEN": oauth2("drop-client", "DROP_CS"), "DROP_CS": {"value": CS1},
                 "REFRESH_TOKEN": oauth2("refresh-client", "REFRESH_CS"),
                 "REFRESH_CS": {"value": CS2}, "STATIC_KEY": {"value": static_value}},
        rules=[{"host_pattern": DROP, "secret": "DROP_TOKEN", "scheme": "bearer"},
               {"host_pattern": REFRESH, "secret": "REFRESH_TOKEN", "scheme": "bearer"},
               {"host_pattern": STATIC, "secret": "STATIC_KEY", "scheme": "bearer"}],
        hosts={})


vg = t.Vaultgate(d, vault(V1), pins=[endpoint.pin(TOKEN_HOST)] +
                 [api_up.pin(h) for h in (DROP, REFRESH, STATIC)],
                 upstream_ca=certs["ca"]).start()
answers = []


def get(host, path="/v1/thing"):
    r = vg.request(host, b"GET %s HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer placeholder\r\n"
                   b"Connection: close\r\n\r\n" % (path.encode(), host.encode()))
    answers.append(r.raw_head + r.body)
    return r


def sent(host):
    return seen[host][-1].split(" ", 1)[1]


def check_history(host, values):
    """The debug endpoint shows every earlier Authorization: each value comes back starred."""
    r = get(host, "/history")
    t.check(r.status == 200, "%s /history: %r" % (host, r))
    earlier = json.loads(r.body)["earlier"]
    t.check(len(earlier) >= len(values), "%s: %d earlier values" % (host, len(earlier)))
    for v in values:
        stars = "Bearer " + "*" * len(v)
        t.check(v.encode() not in r.raw_head + r.body,
                "%s: an earlier value came back in clear" % host)
        t.check(stars in earlier, "%s: no starred earlier value in %r" % (host, earlier))
        t.check(stars in r.header("X-Earlier"), "%s: X-Earlier not starred" % host)


try:
    # -- a 401 drops the token: the one it replaced stays masked -----------------------------
    t.check(get(DROP).status == 200, "first request")
    t1 = sent(DROP)
    r = get(DROP, "/401")
    t.check(r.status == 401, "the 401 reaches the sandbox: %r" % r)
    t.check(t.wait_for(lambda: get(DROP).status == 200 and sent(DROP) != t1, timeout=10),
            "no new token after the 401")
    t2 = sent(DROP)
    check_history(DROP, [t1, t2])

    # -- a refresh replaces the token: the one before stays masked ---------------------------
    t.check(get(REFRESH).status == 200, "first request (refresh)")
    r1 = sent(REFRESH)
    t.check(t.wait_for(lambda: get(REFRESH).status == 200 and sent(REFRESH) != r1, timeout=10),
            "the token was not refreshed")
    check_history(REFRESH, [r1, sent(REFRESH)])

    # -- a reload replaces a static value: the value before stays masked ---------------------
    t.check(get(STATIC).status == 200 and sent(STATIC) == V1, "static value injected")
    with open(vg.vault_path, "w") as f:
        json.dump(vault(V2), f)
    os.chmod(vg.vault_path, 0o600)
    n = len(vg.events("reload"))
    vg.proc.send_signal(signal.SIGHUP)
    t.check(t.wait_for(lambda: len(vg.events("reload")) > n, timeout=10), "no reload")
    t.check(get(STATIC).status == 200 and sent(STATIC) == V2, "the reloaded value is injected")
    check_history(STATIC, [V1, V2])

    canaries = [V1, V2, CS1, CS2] + endpoint.issued
    t.check_absent({"the log": vg.stderr(), "the metrics": t.metrics_text(vg),
                    "the status": json.dumps(vg.status())}, canaries)
    t.check_absent({"answer %d" % i: a.decode("latin-1") for i, a in enumerate(answers)},
                   canaries)
    t.check(not endpoint.violations, "token endpoint violations: %r" % endpoint.violations)
finally:
    vg.stop()
    endpoint.stop()
    api_up.stop()
print("PASS")
