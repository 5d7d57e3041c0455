#!/usr/bin/env python3
"""The status page (SPEC §7) as a person sees it, in Debian's headless Chromium.

Three runs, one per enforcement state:
- enforced: a rule and a block entry, the SQLite store, traffic (an injection, refusals, a
  protocol error). The DOM Chromium renders holds every field of /v1/status (run id and user,
  the state, the mode and why, the listeners, the audit store and its health, the counts of
  requests by decision and of refusals, the blocked hosts with count, first and last seen and
  source, the egress routes with route and count, the timeouts, the CA fingerprint), each equal
  to what the JSON says; it has no script, a 5 s meta refresh, and the canary secret nowhere.
- nothing to enforce: an empty vault: a plain note (an <aside role=note>), no warning.
- degraded: audit off and a failed reload whose error quotes a vault key made of markup: a
  warning (a <section role=alert>) listing each reason, the markup shown as text (no element
  made of it).
The three states differ in wording, element and colour: screenshots at 1280 px (and at 360 px for
two of them) are decoded and each state's background colour is found in its own screenshot only
(so the stylesheet loaded under the page's CSP). VG_SCREENSHOT_DIR, when set, keeps the
screenshots (docs/status-page-*.png come from it)."""
import os
import shutil
import signal
import time

import browser
import vgtest as t

SECRET = "sk-canary-STATUS-page-7781"
COLOURS = {"enforced": (0xda, 0xfb, 0xe1), "degraded": (0xff, 0xeb, 0xe9),
           "nothing_to_enforce": (0xdd, 0xf4, 0xff)}
ELEMENT = {"enforced": ("section", None), "degraded": ("section", "alert"),
           "nothing_to_enforce": ("aside", "note")}
HOSTILE_KEY = '<img src=x onerror=alert(1)>'


def page(vg):
    return "http://127.0.0.1:%d/" % vg.admin_port


def shots(vg, state, widths):
    d = t.tmpdir()
    out = []
    for w in widths:
        path = os.path.join(d, "status-%s-%d.png" % (state, w))
        browser.screenshot(page(vg), path, w, 2400 if w < 600 else 1000)
        out.append(path)
    keep = os.environ.get("VG_SCREENSHOT_DIR")
    if keep:
        for p in out:
            shutil.copy(p, keep)
    return out


def check_state(dom, state, shot_paths):
    e = dom.by_id.get("enforcement")
    t.check(e is not None, "no #enforcement element")
    tag, role = ELEMENT[state]
    t.check(e.tag == tag and e.attrs.get("role") == role and
            e.attrs.get("data-state") == state,
            "%s: element %s role %r data-state %r" % (state, e.tag, e.attrs.get("role"),
                                                     e.attrs.get("data-state")))
    words = {"enforced": "Enforced", "degraded": "Degraded", "nothing_to_enforce":
             "Note: nothing to enforce"}[state]
    t.check(dom.text("state-title").endswith(words) or dom.text("state-title").startswith(words)
            or words in dom.text("state-title"), "%s: title %r" % (state, dom.text("state-title")))
    t.check((dom.by_id.get("warnings") is not None) == (state == "degraded"),
            "%s: a warning list only when degraded" % state)
    # the first thing in <main> is the state
    main = dom.tags["main"][0]
    t.check(main.children and main.children[0] is e, "%s: the state is not first" % state)
    t.check(not dom.tags.get("script"), "%s: the page has a script element" % state)
    refresh = [m for m in dom.tags.get("meta", []) if m.attrs.get("http-equiv") == "refresh"]
    t.check(len(refresh) == 1 and refresh[0].attrs.get("content") == "5", "meta refresh")
    for path in shot_paths:
        _, _, rows = browser.png_pixels(path, max_rows=500)
        for other, rgb in COLOURS.items():
            n = browser.colour_count(rows, rgb)
            if other == state:
                t.check(n > 2000, "%s: its colour %r covers %d pixels of %s" %
                        (state, rgb, n, os.path.basename(path)))
            else:
                t.check(n == 0, "%s: the colour of %s is in %s (%d pixels)" %
                        (state, other, os.path.basename(path), n))


def check_fields(dom, st, blocked, routes):
    t.check(dom.text("run-id") == st["run"]["id"], "run id %r" % dom.text("run-id"))
    t.check(dom.text("run-user") == st["run"]["user"], "run user %r" % dom.text("run-user"))
    t.check(dom.text("mode") == st["mode"], "mode %r" % dom.text("mode"))
    t.check(dom.text("mode-reason") == st["mode_reason"], "mode reason %r" %
            dom.text("mode-reason"))
    t.check(dom.text("rules") == str(st["rules"]), "rules %r" % dom.text("rules"))
    t.check(dom.text("host-entries") == str(st["host_entries"]), "host entries")
    lis = [" ".join(li.text.split()) for li in dom.by_id["listeners"].find_all("li")]
    t.check(lis == st["listeners"], "listeners %r vs %r" % (lis, st["listeners"]))
    t.check(dom.text("audit-store") == st["audit"]["store"], "audit store %r" %
            dom.text("audit-store"))
    t.check(dom.text("audit-health") == "healthy", "audit health %r" % dom.text("audit-health"))
    t.check(dom.text("ca-sha256").replace(":", "") == st["ca_sha256"], "CA fingerprint %r" %
            dom.text("ca-sha256"))
    t.check(dom.text("started-at") == st["started_at"], "started at")
    rows = {tr.find_all("th")[0].text.split()[0]: tr.find_all("td")[0].text
            for tr in dom.by_id["timeouts"].find_all("tr") if tr.find_all("td")}
    t.check(rows == {k: str(v) for k, v in st["timeouts"].items()}, "timeouts %r" % rows)
    got = [[" ".join(td.text.split()) for td in tr.find_all("td")]
           for tr in dom.by_id["blocked"].find_all("tr") if tr.find_all("td")]
    want = [[r["host"], str(r["seen_count"]), r["first_seen"], r["last_seen"], r["source"]]
            for r in sorted(blocked, key=lambda r: (-r["seen_count"], r["host"]))]
    t.check(got == want, "blocked hosts %r vs %r" % (got, want))
    got = [[" ".join(td.text.split()) for td in tr.find_all("td")]
           for tr in dom.by_id["routes"].find_all("tr") if tr.find_all("td")]
    want = [[r["host"], r["route"], str(r["count"])]
            for r in sorted(routes, key=lambda r: (-r["count"], r["host"]))]
    t.check(got == want, "egress routes %r vs %r" % (got, want))


def enforced(certs, up):
    d = os.path.join(t.tmpdir(), "enforced")
    os.makedirs(d)
    vault = t.example_vault(run_id="run-page-1", secrets={"API_KEY": {"value": SECRET}})
    vg = t.Vaultgate(d, vault, pins=[up.pin("api.example.test")], upstream_ca=certs["ca"],
                     audit="sqlite", threads=1)
    os.chmod(vg.vault_path, 0o600)
    vg.start()
    r = vg.curl("api.example.test", "/v1/x", ["-H", "Authorization: Bearer placeholder"])
    t.check(r.returncode == 0 and b"****" in r.stdout, "injection: %r" % r.stdout[:200])
    for _ in range(3):
        r = vg.curl("blocked.example.test", "/x", ["-o", "/dev/null", "-w", "%{http_code}"])
        t.check(r.stdout == b"403", "blocked: %r" % r.stdout)
    res = vg.request("api.example.test", b"GET /x HTTP/1.1\r\nHost: api.example.test\r\n"
                     b"Bad Name: x\r\n\r\n")
    t.check(res.status == 400, "protocol error: %d" % res.status)
    def flushed():  # the first refusal is written at once, later counts within a second
        b = t.json.loads(vg.admin_get("/v1/blocked-hosts")[1])
        r = t.json.loads(vg.admin_get("/v1/egress-routes")[1])
        return [x["seen_count"] for x in b] == [3] and sum(x["count"] for x in r) == 4
    t.check(t.wait_for(flushed, 10), "audit rows not flushed")
    st = vg.status()
    t.check(st["enforcement"] == "enforced", "enforcement %r (warnings %r)" %
            (st["enforcement"], st["warnings"]))
    blocked = t.json.loads(vg.admin_get("/v1/blocked-hosts")[1])
    routes = t.json.loads(vg.admin_get("/v1/egress-routes")[1])
    text = browser.dump_dom(page(vg))
    dom = browser.Dom(text)
    t.check(SECRET not in text, "the secret is on the page")
    check_fields(dom, st, blocked, routes)
    counts = {k: dom.by_id["requests-" + k].find_all("td")[0].text
              for k in ("inject", "allow", "block", "error")}
    t.check(counts == {"inject": "1", "allow": "0", "block": "3", "error": "1"},
            "request counts %r" % counts)
    t.check(dom.text("refusals") == "3", "refusals %r" % dom.text("refusals"))
    check_state(dom, "enforced", shots(vg, "enforced", (1280, 360)))
    t.check(vg.stop() == 0, "stop")
    t.check(SECRET not in vg.stderr(), "the secret is in the log")
    t.log("ok enforced: every field, counts, rows")


def nothing_to_enforce():
    d = os.path.join(t.tmpdir(), "nothing")
    os.makedirs(d)
    vault = t.example_vault(run_id="run-page-2", secrets={}, rules=[], hosts={})
    vg = t.Vaultgate(d, vault, audit="sqlite")
    os.chmod(vg.vault_path, 0o600)
    vg.start()
    st = vg.status()
    t.check(st["enforcement"] == "nothing_to_enforce" and st["warnings"] == [],
            "enforcement %r warnings %r" % (st["enforcement"], st["warnings"]))
    dom = browser.Dom(browser.dump_dom(page(vg)))
    t.check(dom.text("blocked-none") == "None in this run.", "no blocked hosts %r" %
            dom.text("blocked-none"))
    check_state(dom, "nothing_to_enforce", shots(vg, "nothing", (1280,)))
    t.check(vg.stop() == 0, "stop")
    t.log("ok nothing to enforce: a note")


def degraded():
    d = os.path.join(t.tmpdir(), "degraded")
    os.makedirs(d)
    vault = t.example_vault(run_id="run-page-3", secrets={"API_KEY": {"value": SECRET}})
    vg = t.Vaultgate(d, vault, audit="off")
    os.chmod(vg.vault_path, 0o600)
    vg.start()
    with open(vg.vault_path, "w") as f:
        t.json.dump({"version": 1, "run": {"id": "x"}, HOSTILE_KEY: 1}, f)
    vg.proc.send_signal(signal.SIGHUP)
    t.check(t.wait_for(lambda: len(vg.status()["warnings"]) == 2, 10), "no reload warning: %r" %
            vg.status()["warnings"])
    st = vg.status()
    t.check(st["enforcement"] == "degraded", "enforcement %r" % st["enforcement"])
    text = browser.dump_dom(page(vg))
    dom = browser.Dom(text)
    items = [" ".join(li.text.split()) for li in dom.by_id["warnings"].find_all("li")]
    t.check(items == st["warnings"], "warnings %r vs %r" % (items, st["warnings"]))
    t.check(any(HOSTILE_KEY in w for w in items), "the markup is not shown as text: %r" % items)
    t.check(not dom.tags.get("img"), "a vault key became an element")
    t.check(dom.text("blocked-none").startswith("The audit store is off"), "rows without a store")
    t.check("off" in dom.text("audit-health"), "audit health %r" % dom.text("audit-health"))
    check_state(dom, "degraded", shots(vg, "degraded", (1280, 360)))
    t.check(vg.stop() == 0, "stop")
    t.log("ok degraded: a warning with each reason, markup escaped")


def main():
    t.require_binary()
    if browser.chromium() is None:
        t.skip("chromium is not installed (scripts/deps installs it)")
    start = time.monotonic()
    d = t.tmpdir()
    certs = t.make_certs(d, ["api.example.test"])
    up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)
    enforced(certs, up)
    nothing_to_enforce()
    degraded()
    t.log("status page cases took %.1fs" % (time.monotonic() - start))


if __name__ == "__main__":
    main()
