#!/usr/bin/env python3
"""--upstream-proxy: upstream connections go through an HTTP CONNECT proxy (a small one started
here on loopback), TLS to the real host inside the tunnel is verified as usual, and such requests
count under route `tunnel` in egress_route_log. A blocked host still counts as `refused`."""
import json
import os
import subprocess

import vgtest as t

t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"], t.echo_handler)


proxy = t.ConnectProxy((up.addr, up.port))
vg = t.Vaultgate(d, t.example_vault(run_id="run-tunnel-1"), upstream_ca=certs["ca"],
                 audit="sqlite", extra=["--upstream-proxy", "http://127.0.0.1:%d" % proxy.port])
vg.start()
try:
    for _ in range(2):
        r = vg.request("api.example.test", b"GET /t HTTP/1.1\r\nHost: api.example.test\r\n"
                       b"Connection: close\r\n\r\n")
        t.check(r.status == 200, "through the tunnel: %r" % r)
    t.check(proxy.lines and proxy.lines[0] == "CONNECT api.example.test:443 HTTP/1.1",
            "CONNECT lines: %r" % proxy.lines)
    t.check(b"Authorization: Bearer sk-canary-SECRET-api-0001" in up.all_bytes(),
            "the upstream did not get the injected request through the tunnel")
    r = vg.request("blocked.example.test", b"GET / HTTP/1.1\r\nHost: blocked.example.test\r\n\r\n",
                   verify=False)
    t.check(r.status == 403, "blocked host: %r" % r)
finally:
    rc = vg.stop()
t.check(rc == 0, "vaultgate exited %r" % rc)
rows = json.loads(subprocess.run([t.VG_BIN, "audit", "--store", "sqlite:" +
                                  os.path.join(vg.state, "audit.db"), "routes", "--json"],
                                 stdout=subprocess.PIPE, check=True).stdout)
routes = {(r["host"], r["route"]): r["count"] for r in rows}
t.check(routes.get(("api.example.test", "tunnel")) == 2, "routes: %r" % routes)
t.check(("api.example.test", "direct") not in routes, "a tunnelled request counted direct")
t.check(routes.get(("blocked.example.test", "refused")) == 1, "routes: %r" % routes)
