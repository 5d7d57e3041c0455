#!/usr/bin/env python3
"""OAuth 2.0 sources across SIGHUP, through --upstream-proxy, and without blocking a loop
(SPEC §3, §8), with one worker thread:

- the token endpoint is reached through the --upstream-proxy tunnel like any upstream (its
  CONNECT is seen by the proxy, its route counts as `tunnel`);
- SIGHUP with one source unchanged and one changed (another scope): the unchanged one keeps
  its token (no fetch), the changed one starts afresh (a fetch with the new scope, a new token);
- while the endpoint holds that fetch back (until the case lets it go), requests to other hosts
  on the same worker are answered, and the request that needs the new token waits, then gets
  it;
- a source that a reload removes stops being refreshed.

Why this can fail: a reload that drops every token (or keeps a changed one), a fetch that
ignores --upstream-proxy, or a fetch that blocks the worker's loop."""
import json
import signal
import threading
import time

import vgtest as t
from oauthstub import Client, TokenEndpoint

TOKEN_HOST, KEEP, CHANGE, GONE, STATIC = ("token.reload.test", "keep.reload.test",
                                          "change.reload.test", "gone.reload.test",
                                          "static.reload.test")
KEEP_SECRET, CHANGE_SECRET, GONE_SECRET = ("cs-CANARY-keep-0011", "cs-CANARY-change-0012",
                                           "cs-CANARY-gone-0013")
STATIC_KEY = "sk-CANARY-static-0014"

t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, [TOKEN_HOST, KEEP, CHANGE, GONE, STATIC])
clients = [Client("keep", KEEP_SECRET, scope="s1", lifetime=3600),
           Client("change", CHANGE_SECRET, scope="before", lifetime=3600),
           Client("gone", GONE_SECRET, lifetime=4)]
endpoint = TokenEndpoint(certs, clients)
api_up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)


targets = {TOKEN_HOST: (endpoint.up.addr, 443)}
targets.update({h: (api_up.addr, 443) for h in (KEEP, CHANGE, GONE, STATIC)})
proxy = t.ConnectProxy(targets)


def vault(change_scope, with_gone):
    secrets = {"KEEP_TOKEN": {"oauth2": {"token_url": "https://%s/token" % TOKEN_HOST,
                                         "grant": "client_credentials", "client_id": "keep",
                                         "client_secret": "KEEP_SECRET", "scope": "s1"}},
               "KEEP_SECRET": {"value": KEEP_SECRET},
               "CHANGE_TOKEN": {"oauth2": {"token_url": "https://%s/token" % TOKEN_HOST,
                                           "grant": "client_credentials", "client_id": "change",
                                           "client_secret": "CHANGE_SECRET",
                                           "scope": change_scope}},
               "CHANGE_SECRET": {"value": CHANGE_SECRET},
               "STATIC_KEY": {"value": STATIC_KEY}}
    rules = [{"host_pattern": KEEP, "secret": "KEEP_TOKEN", "scheme": "bearer"},
             {"host_pattern": CHANGE, "secret": "CHANGE_TOKEN", "scheme": "bearer"},
             {"host_pattern": STATIC, "secret": "STATIC_KEY", "scheme": "bearer"}]
    if with_gone:
        secrets["GONE_TOKEN"] = {"oauth2": {"token_url": "https://%s/token" % TOKEN_HOST,
                                            "grant": "client_credentials", "client_id": "gone",
                                            "client_secret": "GONE_SECRET"}}
        secrets["GONE_SECRET"] = {"value": GONE_SECRET}
        rules.append({"host_pattern": GONE, "secret": "GONE_TOKEN", "scheme": "bearer"})
    return t.example_vault(secrets=secrets, rules=rules, hosts={})


vg = t.Vaultgate(d, vault("before", True), upstream_ca=certs["ca"], threads=1, audit="sqlite",
                 extra=["--upstream-proxy", "http://127.0.0.1:%d" % proxy.port]).start()
answers = []


def get(host):
    r = vg.request(host, b"GET /x HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" %
                   host.encode())
    answers.append(r.raw_head + r.body)
    return r


def token_of(host):
    reqs = [r for r in api_up.requests if r.header("Host") == [host]]
    return reqs[-1].header("Authorization")[0].split(" ", 1)[1]


try:
    for h, prefix in ((KEEP, "at-keep-1-"), (CHANGE, "at-change-1-"), (GONE, "at-gone-1-")):
        r = get(h)
        t.check(r.status == 200 and token_of(h).startswith(prefix), "%s: %r" % (h, r))
    t.check("CONNECT %s:443 HTTP/1.1" % TOKEN_HOST in proxy.lines,
            "the token endpoint was not reached through --upstream-proxy: %r" % proxy.lines)

    # -- SIGHUP: KEEP unchanged, CHANGE with another scope (its fetch held), GONE removed -----
    held = threading.Event()
    endpoint.set_delay("change", held)
    clients[1].scope = "after"
    with open(vg.vault_path, "w") as f:
        json.dump(vault("after", False), f)
    gone_before = endpoint.fetches["gone"]
    vg.proc.send_signal(signal.SIGHUP)
    t.check(t.wait_for(lambda: any(e.get("reason") == "vault_loaded" for e in vg.events("reload")),
                       timeout=30), "no reload")
    t.check(t.wait_for(lambda: endpoint.fetches["change"] == 2), "the changed source not fetched")
    # the worker's loop is free while the fetch is held: these are answered before it ends
    for h in (STATIC, KEEP):
        r = get(h)
        t.check(r.status == 200, "%s during the fetch: %r" % (h, r))
    t.check(token_of(KEEP).startswith("at-keep-1-"), "the unchanged source lost its token")
    t.check(endpoint.fetches["keep"] == 1, "the unchanged source fetched again")
    # the changed source's request waits for the fetch: unanswered while it is held
    change = {}
    waiter = threading.Thread(target=lambda: change.update(r=get(CHANGE)), daemon=True)
    waiter.start()
    t.wait_for(lambda: not waiter.is_alive(), timeout=2)
    t.check(waiter.is_alive(), "the request for the changed source did not wait for its fetch")
    held.set()
    waiter.join(60)
    r = change.get("r")
    t.check(r is not None and r.status == 200 and token_of(CHANGE).startswith("at-change-2-"),
            "the changed source: %r %s" % (r, token_of(CHANGE)))
    t.check(endpoint.fetches["change"] == 2, "changed source: %d fetches" %
            endpoint.fetches["change"])
    # a removed source is not refreshed any more (its 4 s token would be by now)
    time.sleep(3)
    t.check(endpoint.fetches["gone"] == gone_before, "a removed source is still refreshed")
    status = json.dumps(vg.status())
    t.check(json.loads(status)["warnings"] == [] or
            all("token endpoint" not in w for w in json.loads(status)["warnings"]),
            "status: %s" % status)
finally:
    vg.stop()
    endpoint.stop()
    api_up.stop()

t.check(not endpoint.violations, "the token endpoint saw: %r" % endpoint.violations)
routes = {(row["host"], row["route"]) for row in t.audit_rows(vg, "routes")}
t.check((TOKEN_HOST, "tunnel") in routes and (TOKEN_HOST, "direct") not in routes,
        "token endpoint routes: %r" % routes)
t.check_absent({"log": vg.stderr(), "status": status,
                "answers": b"".join(answers).decode("latin-1")},
               [KEEP_SECRET, CHANGE_SECRET, GONE_SECRET, STATIC_KEY] + endpoint.issued)
t.log("ok")
