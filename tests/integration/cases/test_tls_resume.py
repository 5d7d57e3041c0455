#!/usr/bin/env python3
"""TLS session resumption on the HTTPS listener, TLS 1.2 and 1.3: a ticket from a full handshake
resumes (no certificate is sent then, so none is looked up), the resumed connection serves
requests, and the name decision still runs on every resumed ClientHello (no SNI: refused)."""
import socket
import ssl
import vgtest as t

HOST = "api.example.test"
REQ = b"GET / HTTP/1.1\r\nHost: api.example.test\r\nConnection: close\r\n\r\n"


def connect(vg, ctx, sni, session=None):
    raw = socket.create_connection(("127.0.0.1", vg.port), timeout=10)
    return ctx.wrap_socket(raw, server_hostname=sni, session=session)


def get(s):
    """One request on s; returns the status (the ticket of TLS 1.3 arrives with the answer)."""
    s.sendall(REQ)
    return t.parse_response(t.read_until_close(s))[0].status


d, certs, up, vg = t.setup()
try:
    for version in (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3):
        ctx = vg.client_ctx()  # a session resumes only on the context it came from
        ctx.minimum_version = ctx.maximum_version = version
        s = connect(vg, ctx, HOST)
        t.check(not s.session_reused, "%s: first handshake resumed" % version)
        t.check(get(s) == 200, "%s: full handshake request" % version)
        sess = s.session
        s.close()
        t.check(sess is not None and sess.has_ticket, "%s: no ticket issued" % version)
        for _ in range(2):
            s = connect(vg, ctx, HOST, sess)
            t.check(s.session_reused, "%s: offered ticket not resumed" % version)
            t.check(s.getpeercert() is not None, "%s: no peer certificate" % version)
            t.check(get(s) == 200, "%s: resumed handshake request" % version)
            sess = s.session
            s.close()
        # the ticket offered without a name: the decision refuses it, resumed or not
        ctx.check_hostname = False
        try:
            s = connect(vg, ctx, None, sess)
            s.close()
            t.fail("%s: handshake without SNI succeeded" % version)
        except ssl.SSLError as e:
            t.check("UNRECOGNIZED_NAME" in str(e).upper(), "%s: alert: %s" % (version, e))
finally:
    vg.stop()
    up.stop()
