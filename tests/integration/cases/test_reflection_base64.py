#!/usr/bin/env python3
"""Reflection masking of the secret's base64 spellings (SPEC §4): an HTTP/1.1 upstream echoes the
injected secret base64-encoded inside JSON, behind 0 to 5 foreign bytes (so at each of the three
alignments the secret can have inside a longer base64 text) and before 0 to 2, in the standard
and the URL-safe alphabet, padded and not, the standard '/' also JSON-escaped as '\\/'; a bearer
rule, and a basic rule whose secret is echoed the same way (its wire form, base64 of
user:secret, is echoed as sent). The answer comes once with a Content-Length body and once
chunked, every chunk cut in the middle of an echo; curl is the client.

The client receives exactly the upstream's bytes with every base64 character that depends only
on the secret's bytes replaced by '*'; only the bits of the secret's first and last bytes that
share a character with foreign bits stay readable: decoding the received text (stars read as
'A') yields no two consecutive bytes of the secret. The log never holds the secret.

Why this can fail: a masker that looks for the secret only as sent (raw, percent- or
JSON-escaped) hands the sandbox every base64 echo, e.g. a JWT-like blob or a debug field."""
import base64
import json
import vgtest as t

SECRETS = {"BEARER_KEY": "sk-canary-b64?~>ZqW-0001", "BASIC_KEY": "ghp_canary>>?B64~42x"}
HOSTS = {"api.example.test": "BEARER_KEY", "git.example.test": "BASIC_KEY"}
USER = "x-access-token"


def secret_of(req):
    auth = req.header("Authorization")[0]
    if auth.startswith("Bearer "):
        return auth[len("Bearer "):].encode(), []
    tok = auth[len("Basic "):]
    return base64.b64decode(tok).split(b":", 1)[1], [tok]


def echoes(secret):
    """(text, [(begin, end) of the characters that depend on the secret alone]) per echo."""
    out = []
    n = len(secret)
    for pre in range(6):
        for post in range(3):
            for url in (False, True):
                for pad in (False, True):
                    for esc in ((False, True) if not url else (False,)):
                        raw = b"Q" * pre + secret + b"z" * post
                        enc = (base64.urlsafe_b64encode if url else base64.b64encode)(raw)
                        if not pad:
                            enc = enc.rstrip(b"=")
                        lo, hi = (8 * pre + 5) // 6, (8 * (pre + n)) // 6
                        marks = bytearray(len(enc))
                        marks[lo:hi] = b"*" * (hi - lo)
                        text, want = bytearray(), bytearray()
                        for c, m in zip(enc, marks):
                            if esc and c == ord("/"):
                                text += b"\\"
                                want += b"*" if m else b"\\"
                            text.append(c)
                            want.append(m if m else c)
                        out.append((bytes(text), bytes(want)))
    return out


def bodies(req):
    secret, wire = secret_of(req)
    ech = echoes(secret)
    plain = b"".join(b'{"n":%d,"blob":"%s"}\n' % (i, e) for i, (e, _) in enumerate(ech))
    want = b"".join(b'{"n":%d,"blob":"%s"}\n' % (i, w) for i, (_, w) in enumerate(ech))
    for tok in wire:
        plain += b'{"sent":"%s"}\n' % tok.encode()
        want += b'{"sent":"%s"}\n' % (b"*" * len(tok))
    return plain, want, ech


def handler(req, ci):
    plain, _, ech = bodies(req)
    if req.target.startswith("/identity"):
        return [t.resp_bytes(200, plain, [("Content-Type", "application/json")])]
    cuts = sorted({plain.index(e) + len(e) // 2 for e, _ in ech})
    acts, pos = [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"], 0
    for c in cuts + [len(plain)]:
        part, pos = plain[pos:c], c
        if part:
            acts.append(b"%x\r\n%s\r\n" % (len(part), part))
    return acts + [b"0\r\n\r\n"]


def longest_run(secret, got_text):
    """The longest run of the secret's bytes in the received base64 text decoded (stars read
    as 'A'): what the sandbox could recover."""
    best = 0
    s = got_text.replace(b"*", b"A").replace(b"-", b"+").replace(b"_", b"/").rstrip(b"=")
    dec = base64.b64decode(s + b"=" * (-len(s) % 4))
    for i in range(len(secret)):
        for j in range(i + best + 1, len(secret) + 1):
            if secret[i:j] in dec:
                best = j - i
            else:
                break
    return best


vault = t.example_vault(
    secrets={k: {"value": v} for k, v in SECRETS.items()},
    rules=[{"host_pattern": "api.example.test", "secret": "BEARER_KEY", "scheme": "bearer"},
           {"host_pattern": "git.example.test", "secret": "BASIC_KEY", "scheme": "basic",
            "username": USER}])
d, certs, up, vg = t.setup(names=tuple(HOSTS), vault=vault, handler=handler)
bad = []
try:
    for host, sname in HOSTS.items():
        for kind in ("/identity", "/chunked"):
            what = host + kind
            n = len(up.requests)
            r = vg.curl(host, kind)
            if r.returncode != 0 or len(up.requests) != n + 1:
                bad.append("%s: curl exit %d, %d request(s) upstream" %
                           (what, r.returncode, len(up.requests) - n))
                continue
            secret, _ = secret_of(up.requests[-1])
            if secret != SECRETS[sname].encode():
                bad.append("%s: the secret was not injected (test broken)" % what)
                continue
            plain, want, ech = bodies(up.requests[-1])
            if len(ech) != 6 * 3 * 2 * 3:
                bad.append("%s: %d echoes (test broken)" % (what, len(ech)))
            if r.stdout != want:
                lines = [i for i, (a, b) in enumerate(zip(r.stdout.split(b"\n"),
                                                          want.split(b"\n"))) if a != b]
                bad.append("%s: %d of %d bytes, lines %s differ from the masked echo" %
                           (what, len(r.stdout), len(want), lines[:6]))
            leaks = 0
            for line in r.stdout.split(b"\n"):
                if line.startswith(b'{"n":'):
                    echo = json.loads(line)
                    if b"\\" in ech[echo["n"]][0]:
                        continue  # '\/' starred is two stars for one character: compared above
                    if longest_run(secret, echo["blob"].encode()) >= 2:
                        leaks += 1
            if leaks:
                bad.append("%s: %d echo(es) still decode to two bytes of the secret in a row" %
                           (what, leaks))
finally:
    vg.stop()
    up.stop()
log = vg.stderr()
for s in SECRETS.values():
    for spelled in (s.encode(), base64.b64encode(s.encode()), base64.urlsafe_b64encode(s.encode())):
        if spelled.rstrip(b"=").decode() in log:
            bad.append("a secret or its base64 is in the log")
if bad:
    t.fail("\n  ".join(["%d problem(s):" % len(bad)] + bad))
