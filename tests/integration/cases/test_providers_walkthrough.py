#!/usr/bin/env python3
"""docs/gateway.md's provider walk-through, run as written: the block under the marker
`<!-- walkthrough: providers` is run by bash with three changes only (`VG=` names a copy of the
checkout's scripts/ and conf/ with the built binary, /tmp/vg-providers is the case's temp dir,
and the namespaces' names carry the case's PID). It builds a sandbox namespace whose only way out is a gateway namespace, runs
conf/vault.providers.example.json there behind the nftables ruleset, runs the probe in the
sandbox, and sends the OpenAI, Anthropic and Gemini SDK-shaped requests to local stand-ins:
each stand-in must have received its provider's key in the provider's own header (it comes back
masked, as many stars as the key is long), another host gets vaultgate's 403 and a
blocked_host_log row, and no key appears in the output or the log."""
import os
import re
import shutil
import subprocess

import vgtest as t
import walkthrough

KEYS = {"Authorization: Bearer ": "sk-proj-demo-openai-0001",
        "x-api-key: ": "sk-ant-demo-anthropic-0002",
        "x-goog-api-key: ": "AIzaDemoGeminiKey0003"}
# the block's namespace names, made this run's own: two suites on one machine must not share them
DOC_NETNS = ("vg-sb", "vg-gw")
NETNS = tuple("%s-%d" % (ns, os.getpid()) for ns in DOC_NETNS)


def clean_netns():
    for ns in NETNS:
        subprocess.run(["ip", "netns", "del", ns], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)


def main():
    t.require_binary()
    if os.geteuid() != 0:
        t.skip("network namespaces need root")
    for tool in ("ip", "nft", "curl", "openssl"):
        if not shutil.which(tool):
            t.skip("%s is not installed" % tool)
    d = t.tmpdir()
    vg = walkthrough.checkout(d, ("echo-server",))
    w = os.path.join(d, "providers")
    script = walkthrough.block("docs/gateway.md", "providers")
    clean_netns()
    try:
        rc, out, err = walkthrough.run(
            script, d, [("VG=/path/to/vaultgate", "VG=" + vg), ("w=/tmp/vg-providers", "w=" + w)],
            rename=zip(DOC_NETNS, NETNS))
    finally:
        # whatever the block left behind: its background jobs live in the namespaces
        for ns in NETNS:
            pids = subprocess.run(["ip", "netns", "pids", ns], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL).stdout.split()
            for p in pids:
                subprocess.run(["kill", p.decode()], stderr=subprocess.DEVNULL)
        clean_netns()
    t.check(rc == 0, "the walk-through failed (%d):\n%s\n%s" % (rc, out[-2500:], err[-2500:]))
    with open(os.path.join(w, "vaultgate.log")) as f:
        log = f.read()
    for key in KEYS.values():
        t.check(key not in out + err + log, "a key is in the output or the log")
    t.check("vaultgate probe: ok: 192.0.2.1:443 reaches vaultgate, 192.0.2.1:22 is unreachable"
            in out, "no probe verdict:\n%s" % (out + err)[-1500:])
    for header, key in KEYS.items():
        t.check(re.search(r'"%s\*{%d}"' % (re.escape(header), len(key)), out),
                "the stand-in did not get %r with the key:\n%s" % (header, out[-3000:]))
    t.check(out.count('"server": "provider-stand-in"') == 3, "three stand-in answers")
    for path in ("/v1/chat/completions", "/v1/messages",
                 "/v1beta/models/gemini-1.5-flash:generateContent"):
        t.check('"path": "%s"' % path in out, "no request for %s" % path)
    t.check("placeholder" not in out, "a placeholder reached a stand-in")
    t.check("host blocked by policy" in out and '"host":"downloads.example.test"' in out,
            "the other host was not refused and recorded:\n%s" % out[-1200:])
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        t.check('"secret":"%s"' % name in log, "no injection of %s in the log" % name)
    t.log("ok providers walk-through: probe, three providers injected and masked, one refusal")


if __name__ == "__main__":
    main()
