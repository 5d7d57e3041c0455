#!/usr/bin/env python3
"""Reflection masking of every wire form of a secret (SPEC §4): for a bearer rule (raw), a basic
rule (raw and base64 of user:secret) and a query rule (raw and percent-encoded, with characters
that must be encoded), an /echo upstream that returns each form it received - in a response
header and in the body - never hands one back:
- identity body (Content-Length);
- chunked body where chunk N ends with the first half of a form and chunk N+1, sent after a
  delay, starts with the rest;
- gzip (chunked, the compressed stream itself split across delayed chunks) and deflate (zlib)
  although the request asked for identity: the client gets the decoded bytes, masked, without
  Content-Encoding;
- raw deflate (no zlib wrapper): decoded and masked, or refused - never passed on unscanned;
- `Content-Encoding: br`: 502 http_response_content_coding.
The request upstream carries `Accept-Encoding: identity` in place of the client's.
The client receives exactly the upstream's bytes with every form replaced by `*` of equal length.

Why this can fail: each of these is a path by which an echoing upstream returns the secret when
masking is missing, does not carry state across reads, or skips coded bodies."""
import base64
import gzip
import urllib.parse
import zlib
import vgtest as t

SECRETS = {"BEARER_KEY": "sk-canary-SECRET-api-0001", "BASIC_KEY": "ghp_canaryBASIC0042",
           "QUERY_KEY": "qk/canary+Q=1&2 3~x"}
HOSTS = {"api.example.test": "BEARER_KEY", "git.example.test": "BASIC_KEY",
         "q.example.test": "QUERY_KEY"}


def forms_of(req):
    """The forms of the secret as this request carried them (what vaultgate must mask)."""
    host = req.header("Host")[0]
    if host == "api.example.test":
        return [req.header("Authorization")[0][len("Bearer "):].encode()]
    if host == "git.example.test":
        tok = req.header("Authorization")[0][len("Basic "):].encode()
        return [base64.b64decode(tok).split(b":", 1)[1], tok]
    q = req.target.split("?", 1)[1]
    enc = [kv[4:] for kv in q.split("&") if kv.startswith("key=")][0].encode()
    return [urllib.parse.unquote_to_bytes(enc), enc]


def plain_of(forms):
    return b"".join(b"<form %d: %s> filler %d\n" % (i, f, i) for i, f in enumerate(forms)) * 3


def handler(req, ci):
    forms = forms_of(req)
    hdrs = [("X-Echo-%d" % i, f.decode()) for i, f in enumerate(forms)]
    plain = plain_of(forms)
    kind = req.target.split("?")[0]
    if kind == "/identity":
        return [t.resp_bytes(200, plain, hdrs)]
    if kind == "/split":
        # chunks cut in the middle of every occurrence of every form
        acts, pos = [], 0
        cuts = sorted(i + len(f) // 2 for f in forms for i in range(len(plain))
                      if plain.startswith(f, i))
        head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
        head += "".join("%s: %s\r\n" % h for h in hdrs) + "\r\n"
        acts.append(head.encode())
        for c in cuts + [len(plain)]:
            part = plain[pos:c]
            pos = c
            if part:
                acts += [b"%x\r\n%s\r\n" % (len(part), part), ("sleep", 0.05)]
        return acts + [b"0\r\n\r\n"]
    if kind == "/gzip":
        z = gzip.compress(plain)
        h = len(z) // 2
        head = "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"
        head += "".join("%s: %s\r\n" % x for x in hdrs) + "\r\n"
        return [head.encode(), b"%x\r\n%s\r\n" % (h, z[:h]), ("sleep", 0.1),
                b"%x\r\n%s\r\n0\r\n\r\n" % (len(z) - h, z[h:])]
    if kind == "/deflate":
        return [t.resp_bytes(200, zlib.compress(plain), hdrs + [("Content-Encoding", "deflate")])]
    if kind == "/rawdeflate":
        c = zlib.compressobj(wbits=-15)
        return [t.resp_bytes(200, c.compress(plain) + c.flush(),
                             hdrs + [("Content-Encoding", "deflate")])]
    if kind == "/br":
        return [t.resp_bytes(200, b"\x1b\x03\x00" + plain, hdrs + [("Content-Encoding", "br")])]
    return [t.resp_bytes(404, b"?")]


vault = t.example_vault(
    secrets={k: {"value": v} for k, v in SECRETS.items()},
    rules=[{"host_pattern": "api.example.test", "secret": "BEARER_KEY", "scheme": "bearer"},
           {"host_pattern": "git.example.test", "secret": "BASIC_KEY", "scheme": "basic",
            "username": "x-access-token"},
           {"host_pattern": "q.example.test", "secret": "QUERY_KEY", "scheme": "query",
            "name": "key"}])
d, certs, up, vg = t.setup(names=tuple(HOSTS), vault=vault, handler=handler)
bad = []
try:
    for host, sname in HOSTS.items():
        secret = SECRETS[sname].encode()
        for kind in ("/identity", "/split", "/gzip", "/deflate", "/rawdeflate", "/br"):
            n = len(up.requests)
            wire = vg.exchange(host, b"GET " + kind.encode() + b"?key=placeholder&x=1 HTTP/1.1"
                               b"\r\nHost: " + host.encode() + b"\r\nAuthorization: Basic cGg6cGg="
                               b"\r\nAccept-Encoding: gzip, deflate, br\r\nConnection: close"
                               b"\r\n\r\n")
            what = "%s%s" % (host, kind)
            if len(up.requests) != n + 1:
                bad.append("%s: the request did not reach the upstream" % what)
                continue
            req = up.requests[-1]
            forms = forms_of(req)
            if secret not in forms:
                bad.append("%s: not injected (forms %r)" % (what, forms))
                continue
            if req.header("Accept-Encoding") != ["identity"]:
                bad.append("%s: Accept-Encoding upstream %r" % (what, req.header("Accept-Encoding")))
            try:
                r, _ = t.parse_response(wire)
            except (EOFError, ValueError) as e:
                r = None
                bad.append("%s: unparsable answer %r (%s)" % (what, wire[:120], e))
            leaked = [f for f in forms if f in wire or (r is not None and f in r.raw_head + r.body)]
            if leaked:
                bad.append("%s: secret form(s) %r reached the client" % (what, leaked))
            if r is None:
                continue
            if kind == "/br":
                if r.status != 502 or "http_response_content_coding" not in (
                        r.header("Proxy-Status") or ""):
                    bad.append("%s: %d %r, wanted 502 http_response_content_coding" %
                               (what, r.status, r.header("Proxy-Status")))
                continue
            if kind == "/rawdeflate" and r.status == 502:
                continue  # refusing what it cannot decode is allowed; leaking is not
            want = plain_of(forms)
            for f in forms:
                want = want.replace(f, b"*" * len(f))
            if r.status != 200 or r.body != want:
                bad.append("%s: %d body %r, wanted %r" % (what, r.status, r.body[:160], want[:160]))
            for i, f in enumerate(forms):
                if r.header("X-Echo-%d" % i) != "*" * len(f):
                    bad.append("%s: header X-Echo-%d = %r" % (what, i, r.header("X-Echo-%d" % i)))
            if r.header("Content-Encoding") is not None:
                bad.append("%s: Content-Encoding %r passed on" % (what, r.header("Content-Encoding")))
finally:
    vg.stop()
    up.stop()
for s in SECRETS.values():
    if s in vg.stderr():
        bad.append("secret in the log")
if bad:
    t.fail("\n  ".join(["%d problem(s):" % len(bad)] + bad))
