#!/usr/bin/env python3
"""TLS 1.3 suites on both sides (docs/operations.md, "TLS suites"): vaultgate serves
TLS_AES_128_GCM_SHA256 to a client with OpenSSL's default order (which lists
TLS_AES_256_GCM_SHA384 first), TLS_CHACHA20_POLY1305_SHA256 to a client that lists it first,
TLS_AES_256_GCM_SHA384 to a client that offers only that; towards an upstream that follows the
client's order it offers TLS_AES_128_GCM_SHA256 first, and an upstream with its own order (the
fake upstream's default) still gets its choice. Requests are answered on every one of them."""
import ssl
import subprocess

import vgtest as t

d, certs, up, vg = t.setup()
try:
    # a client with OpenSSL's default order
    s = vg.tls_client("api.example.test")
    t.check(s.version() == "TLSv1.3", "client side: %s" % s.version())
    t.check(s.cipher()[0] == "TLS_AES_128_GCM_SHA256", "default client got %s" % (s.cipher(),))
    s.close()
    for suites, want in (("TLS_CHACHA20_POLY1305_SHA256:TLS_AES_128_GCM_SHA256",
                          "TLS_CHACHA20_POLY1305_SHA256"),
                         ("TLS_AES_256_GCM_SHA384", "TLS_AES_256_GCM_SHA384")):
        out = subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % vg.port,
                              "-servername", "api.example.test", "-ign_eof", "-ciphersuites", suites,
                              "-CAfile", vg.ca],
                             input=b"GET / HTTP/1.1\r\nHost: api.example.test\r\n"
                             b"Connection: close\r\n\r\n",
                             capture_output=True, timeout=20).stdout.decode(errors="replace")
        t.check("Cipher is %s" % want in out, "client offering %s: %s" %
                (suites, [l for l in out.splitlines() if "Cipher is" in l]))
        t.check("HTTP/1.1 200" in out, "client offering %s: no 200 answer" % suites)

    # the upstream with its own order (OpenSSL's: AES-256 first, server preference)
    r = vg.request("api.example.test", b"GET /a HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 200, "upstream with its own order: %r" % r)
    t.check(up.ciphers[-1] == "TLS_AES_256_GCM_SHA384", "upstream chose %s" % up.ciphers[-1])
    vg.stop()

    # an upstream that follows the client's order gets vaultgate's first choice
    up.ctx.options &= ~ssl.OP_CIPHER_SERVER_PREFERENCE
    vg.start()
    r = vg.request("api.example.test", b"GET /b HTTP/1.1\r\nHost: api.example.test\r\n"
                   b"Connection: close\r\n\r\n")
    t.check(r.status == 200, "upstream following the client: %r" % r)
    t.check(up.ciphers[-1] == "TLS_AES_128_GCM_SHA256", "upstream chose %s" % up.ciphers[-1])
    t.log("suites: upstream %s" % up.ciphers)
finally:
    vg.stop()
    up.stop()
