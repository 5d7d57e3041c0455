#!/usr/bin/env python3
"""`vaultgate probe` against a running vaultgate: the reserved name probe.vaultgate.invalid is
answered by vaultgate itself (204, Proxy-Status naming the run) without reaching any upstream,
so the probe passes when the sandbox's 443 reaches vaultgate and 22 is closed; it fails when
443 is something else."""
import os
import subprocess

import vgtest as t

t.require_binary()
d = t.tmpdir()
addr = t.free_loopback_addr(443)
vg = t.Vaultgate(d, t.example_vault(run_id="run-probe-7"),
                 extra=["--listen-https", "%s:443" % addr]).start()
try:
    p = subprocess.run([t.VG_BIN, "probe", "--target", addr, "--timeout", "5"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    t.check(p.returncode == 0, "probe failed: %s %s" % (p.stdout, p.stderr))
    r = vg.request("probe.vaultgate.invalid", b"GET / HTTP/1.1\r\nHost: probe.vaultgate.invalid"
                   b"\r\n\r\n", verify=False)  # outside the name constraints, by design
    t.check(r.status == 204 and "run-probe-7" in (r.header("Proxy-Status") or ""), "%r" % r)
    # the documented text is the text sent (docs/gateway.md, docs/operations.md)
    sent = r.header("Proxy-Status")
    t.check(sent == 'vaultgate; details="probe answered for run run-probe-7"', "sent %r" % sent)
    for doc in ("gateway.md", "operations.md"):
        with open(os.path.join(t.SRC, "docs", doc)) as f:
            text = f.read()
        t.check('`Proxy-Status: vaultgate; details="probe answered for run <id>"`' in text,
                "docs/%s does not show the Proxy-Status the probe gets" % doc)
finally:
    vg.stop()
# nothing of vaultgate's on 443 any more: the probe must fail
p = subprocess.run([t.VG_BIN, "probe", "--target", addr, "--timeout", "2"],
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
t.check(p.returncode != 0, "probe passed without vaultgate")
