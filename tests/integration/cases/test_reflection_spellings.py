#!/usr/bin/env python3
"""Reflection masking of every spelling of a secret (SPEC §4): an /echo upstream that writes the
secret it received not as sent but re-encoded - percent-encoded in lower case with '+' for the
space, JSON-escaped ('\\/', '\\\\', '\\"', '\\u00XX' for the other characters), and a mix where
each character is spelled its own way - in the body and in response headers. A bearer rule whose
secret holds a space, '/', '"', '\\' and '+', and a basic rule whose base64 form holds '+', '/'
and '=' (escaped the same ways). Each case once with a Content-Length body and once chunked,
every chunk cut in the middle of a spelling and sent after a delay.
The client receives exactly the upstream's bytes with every spelling replaced by '*' of the
same length, and never the secret in any of these spellings; the log never holds it.

Why this can fail: a masker that looks only for the bytes as sent (or only for upper-case
percent-encoding) hands every one of these echoes to the sandbox."""
import base64
import random
import vgtest as t

SECRETS = {"BEARER_KEY": 'sk-canary Sp/e"l\\l+ing-0001', "BASIC_KEY": "ghp_canary??B?>42"}
HOSTS = {"api.example.test": "BEARER_KEY", "git.example.test": "BASIC_KEY"}
USER = "x-access-token"


def pct_lower(s):
    """Percent-encoding in lower case, '+' for a space (form encoding), unreserved kept."""
    out = []
    for c in s:
        if c == " ":
            out.append("+")
        elif c.isalnum() or c in "-._~":
            out.append(c)
        else:
            out.append("%%%02x" % ord(c))
    return "".join(out)


def json_escaped(s):
    """JSON string escaping as some servers write it: '\\/', '\\\\', '\\"', and '\\u00XX' for
    every other character that is not a letter or digit."""
    short = {"/": "\\/", "\\": "\\\\", '"': '\\"'}
    return "".join(short.get(c) or (c if c.isalnum() else "\\u%04X" % ord(c)) for c in s)


def mixed(s, seed):
    """Each character spelled at random: raw, %hh in either case, \\u00hh, a short escape."""
    rng = random.Random(seed)
    out = []
    for c in s:
        ways = [c, "%%%02x" % ord(c), "%%%02X" % ord(c), "\\u%04x" % ord(c)]
        ways += ["+"] if c == " " else []
        ways += [{"/": "\\/", "\\": "\\\\", '"': '\\"'}[c]] if c in '/\\"' else []
        out.append(rng.choice(ways))
    return "".join(out)


def forms_of(req):
    host = req.header("Host")[0]
    auth = req.header("Authorization")[0]
    if host == "api.example.test":
        return [auth[len("Bearer "):]]
    tok = auth[len("Basic "):]
    return [base64.b64decode(tok).decode().split(":", 1)[1], tok]


def spellings_of(forms):
    out = []
    for i, f in enumerate(forms):
        out += [pct_lower(f), json_escaped(f), mixed(f, i), mixed(f, 100 + i)]
    return [s.encode() for s in out]


def plain_of(spellings):
    return b"".join(b'{"echo %d":"%s"} filler\n' % (i, s) for i, s in enumerate(spellings)) * 2


def handler(req, ci):
    sp = spellings_of(forms_of(req))
    hdrs = [("X-Echo-%d" % i, s.decode()) for i, s in enumerate(sp)]
    plain = plain_of(sp)
    if req.target.startswith("/identity"):
        return [t.resp_bytes(200, plain, hdrs)]
    acts, pos = [], 0
    cuts = sorted(i + len(s) // 2 for s in sp for i in range(len(plain)) if plain.startswith(s, i))
    head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n"
    acts.append((head + "".join("%s: %s\r\n" % h for h in hdrs) + "\r\n").encode())
    for c in cuts + [len(plain)]:
        part, pos = plain[pos:c], c
        if part:
            acts += [b"%x\r\n%s\r\n" % (len(part), part), ("sleep", 0.02)]
    return acts + [b"0\r\n\r\n"]


vault = t.example_vault(
    secrets={k: {"value": v} for k, v in SECRETS.items()},
    rules=[{"host_pattern": "api.example.test", "secret": "BEARER_KEY", "scheme": "bearer"},
           {"host_pattern": "git.example.test", "secret": "BASIC_KEY", "scheme": "basic",
            "username": USER}])
d, certs, up, vg = t.setup(names=tuple(HOSTS), vault=vault, handler=handler)
bad = []
try:
    for host, sname in HOSTS.items():
        secret = SECRETS[sname]
        for kind in ("/identity", "/split"):
            what = host + kind
            n = len(up.requests)
            wire = vg.exchange(host, b"GET " + kind.encode() + b" HTTP/1.1\r\nHost: " +
                               host.encode() + b"\r\nConnection: close\r\n\r\n")
            if len(up.requests) != n + 1:
                bad.append("%s: the request did not reach the upstream" % what)
                continue
            forms = forms_of(up.requests[-1])
            if forms[0] != secret:
                bad.append("%s: the secret was not injected (test broken)" % what)
                continue
            sp = spellings_of(forms)
            if len(set(sp)) != len(sp) or any(s == f.encode() for s in sp for f in forms):
                bad.append("%s: the spellings are not distinct re-encodings (test broken)" % what)
            leaked = [s for s in sp + [f.encode() for f in forms] if s in wire]
            if leaked:
                bad.append("%s: %d spelling(s) of the secret reached the client" %
                           (what, len(leaked)))
            try:
                r, _ = t.parse_response(wire)
            except (EOFError, ValueError) as e:
                bad.append("%s: unparsable answer (%s)" % (what, e))
                continue
            want = plain_of(sp)
            for s in sp:
                want = want.replace(s, b"*" * len(s))
            if r.status != 200 or r.body != want:
                bad.append("%s: status %d, body of %d bytes differs from the masked echo" %
                           (what, r.status, len(r.body)))
            for i, s in enumerate(sp):
                if r.header("X-Echo-%d" % i) != "*" * len(s):
                    bad.append("%s: header X-Echo-%d not masked to %d stars" % (what, i, len(s)))
finally:
    vg.stop()
    up.stop()
log = vg.stderr()
for s in SECRETS.values():
    for spelled in (s, pct_lower(s), json_escaped(s)):
        if spelled in log:
            bad.append("a spelling of a secret is in the log")
if bad:
    t.fail("\n  ".join(["%d problem(s):" % len(bad)] + bad))
