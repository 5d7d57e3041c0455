#!/usr/bin/env python3
"""A ClientHello without SNI is refused with an unrecognized_name alert; the refusal is recorded
under the host (no-sni)."""
import json
import ssl
import vgtest as t

d, certs, up, vg = t.setup(audit="sqlite")
try:
    try:
        s = vg.tls_client(None)
        s.close()
        t.fail("handshake without SNI succeeded")
    except ssl.SSLError as e:
        t.check("UNRECOGNIZED_NAME" in str(e).upper(), "alert: %s" % e)
    rows = t.wait_for(lambda: json.loads(vg.admin_get("/v1/blocked-hosts")[1]))
    t.check(any(r.get("host") == "(no-sni)" for r in rows), "blocked rows: %r" % rows)
    # a host outside the CA's name constraints: refused the same way
    try:
        s = vg.tls_client("unlisted.example.test")
        s.close()
        t.fail("handshake for a host outside the CA constraints succeeded")
    except ssl.SSLError as e:
        t.check("UNRECOGNIZED_NAME" in str(e).upper(), "alert: %s" % e)
    t.check(up.accepts == 0, "upstream contacted")
finally:
    vg.stop()
    up.stop()
