"""oauthstub - an OAuth 2.0 token endpoint for integration cases (standard library only).

TokenEndpoint runs on a FakeUpstream (TLS on <random 127.x>:443) and plays an authorization
server as RFC 6749 describes it, strictly, so that it is the other side's reference:

- each client (by client_id) is configured with its grant, its client authentication (`basic`:
  Authorization: Basic base64(form(id):form(secret)), RFC 6749 §2.3.1, and no secret in the
  body; `post`: client_id and client_secret in the body; `public`: client_id in the body and
  no secret anywhere), the scope and audience it must send, and a token lifetime;
- refresh_token clients get a new refresh token with every token (rotation) and the old one
  stops working (invalid_grant);
- client ids and secrets are decoded as RFC 6749 says (§2.3.1 and Appendix B: form-urlencoded,
  '+' a space, %XX a byte, UTF-8), and the encoded text must be strictly form-encoded (only
  unreserved bytes, '+' and %XX: a raw space, ':' or '+' meant literally is a violation), in the
  Basic credentials and in the body alike;
- fail(client_id, n, status) makes the next n requests of that client fail; set_delay(client_id,
  s) holds its answers back s seconds, or, given a threading.Event, until it is set (for
  concurrent first requests, and for what must go on while a fetch is held);
  Client(answer={...}) sets fields of every answer of that client as given (hostile tokens: a
  NUL, controls, non-ASCII);
- every request is checked, every violation recorded in .violations (a case asserts it is
  empty), and .fetches counts the token requests per client_id; .issued holds every access and
  refresh token handed out (canaries for the case's scans).
"""
import base64
import binascii
import json
import re
import threading
import time
import urllib.parse

import vgtest as t


def form(s):
    return urllib.parse.quote_plus(s, safe="-._~")


# application/x-www-form-urlencoded text as a strict encoder writes it: unreserved bytes ('*'
# too, which WHATWG keeps), '+' for a space, %XX for everything else
FORM_TEXT = re.compile(r"^(?:[A-Za-z0-9*._~-]|\+|%[0-9A-Fa-f]{2})*$")


def form_decode(s):
    """Form-decoded text, or None when s is not strictly form-encoded UTF-8."""
    if not FORM_TEXT.match(s):
        return None
    try:
        return urllib.parse.unquote_plus(s, errors="strict")
    except UnicodeDecodeError:
        return None


class Client:
    def __init__(self, client_id, secret=None, grant="client_credentials", auth="basic",
                 scope=None, audience=None, lifetime=3600, refresh=None, token_type="Bearer",
                 answer=None):
        self.client_id, self.secret, self.grant, self.auth = client_id, secret, grant, auth
        self.scope, self.audience, self.lifetime = scope, audience, lifetime
        self.refresh = refresh  # the refresh token that is valid now
        self.token_type = token_type
        self.answer = answer or {}  # fields set in every answer, as given
        self.refresh_seen = []  # refresh tokens presented, in order
        self.failing, self.fail_status = 0, 500
        self.delay = 0.0
        self.n = 0


class TokenEndpoint:
    def __init__(self, certs, clients, path="/token"):
        self.path = path
        self.clients = {c.client_id: c for c in clients}
        self.lock = threading.Lock()
        self.fetches = {c.client_id: 0 for c in clients}
        self.violations = []
        self.issued = []
        self.up = t.FakeUpstream(certs["cert"], certs["key"], self.handle)

    def pin(self, host):
        return self.up.pin(host)

    def stop(self):
        self.up.stop()

    def fail(self, client_id, n, status=500):
        with self.lock:
            self.clients[client_id].failing, self.clients[client_id].fail_status = n, status

    def set_delay(self, client_id, seconds):
        with self.lock:
            self.clients[client_id].delay = seconds

    def _violation(self, msg):
        with self.lock:
            self.violations.append(msg)

    @staticmethod
    def _json(status, obj):
        return [t.resp_bytes(status, json.dumps(obj).encode(),
                             [("Content-Type", "application/json"), ("Cache-Control", "no-store")],
                             reason="OK" if status == 200 else "Error")]

    def _client_of(self, req, params):
        """Client authentication as the client is configured, or None (and a violation)."""
        auth = req.header("Authorization")
        cid = params.get("client_id", [None])[0]
        if auth:
            try:
                scheme, b64 = auth[0].split(" ", 1)
                raw = base64.b64decode(b64, validate=True).decode("ascii")
            except (ValueError, IndexError, binascii.Error, UnicodeDecodeError):
                self._violation("malformed Basic credentials")
                return None
            if scheme != "Basic" or raw.count(":") != 1:
                # form-encoded id and secret hold no raw ':' (RFC 6749 §2.3.1)
                self._violation("Basic credentials: %d raw ':' (want 1)" % raw.count(":"))
                return None
            user, _, pw = raw.partition(":")
            user, pw = form_decode(user), form_decode(pw)
            if user is None or pw is None:
                self._violation("Basic credentials are not form-encoded")
                return None
            c = self.clients.get(user)
            if c is None or c.auth != "basic" or pw != c.secret:
                self._violation("wrong Basic credentials for %r" % user)
                return None
            if "client_secret" in params or "client_id" in params:
                self._violation("%s: credentials in the body beside Basic" % user)
            return c
        c = self.clients.get(cid)
        if c is None or c.auth == "basic":
            self._violation("client %r did not authenticate as configured" % cid)
            return None
        got = params.get("client_secret", [None])[0]
        if c.auth == "post" and got != c.secret:
            self._violation("%s: wrong client_secret in the body" % cid)
            return None
        if c.auth == "public" and got is not None:
            self._violation("%s: a public client sent a secret" % cid)
        return c

    def handle(self, req, ci):
        if req.method != "POST" or req.target != self.path:
            self._violation("%s %s" % (req.method, req.target))
            return self._json(404, {"error": "not_found"})
        if req.header("Content-Type") != ["application/x-www-form-urlencoded"]:
            self._violation("content type %r" % req.header("Content-Type"))
        for pair in req.body.decode().split("&"):
            name, eq, value = pair.partition("=")
            if not eq or form_decode(name) is None or form_decode(value) is None:
                self._violation("a form field that is not strictly form-encoded")
        params = urllib.parse.parse_qs(req.body.decode(), keep_blank_values=True, strict_parsing=True)
        if any(len(v) != 1 for v in params.values()):
            self._violation("a repeated form parameter")
        c = self._client_of(req, params)
        if c is None:
            return self._json(401, {"error": "invalid_client"})
        with self.lock:
            self.fetches[c.client_id] += 1
            delay, failing = c.delay, c.failing
            if failing:
                c.failing -= 1
        if isinstance(delay, threading.Event):
            delay.wait(120)
        elif delay:
            time.sleep(delay)
        if failing:
            # an error_description that echoes what the client sent: vaultgate must not log it
            return self._json(c.fail_status, {"error": "temporarily_unavailable",
                                              "error_description": "refused " + req.body.decode()})
        grant = params.get("grant_type", [None])[0]
        if grant != c.grant:
            self._violation("%s: grant_type %r" % (c.client_id, grant))
            return self._json(400, {"error": "unsupported_grant_type"})
        for name, want in (("scope", c.scope), ("audience", c.audience)):
            got = params.get(name, [None])[0]
            if got != want:
                self._violation("%s: %s %r, want %r" % (c.client_id, name, got, want))
        with self.lock:
            c.n += 1
            n = c.n
        cid = re.sub(r"[^A-Za-z0-9._-]", "_", c.client_id)  # tokens are visible ASCII
        body = {"access_token": "at-%s-%d-CANARY-%s" % (cid, n, "x" * 24),
                "token_type": c.token_type, "expires_in": c.lifetime}
        if c.grant == "refresh_token":
            rt = params.get("refresh_token", [None])[0]
            with self.lock:
                c.refresh_seen.append(rt)
                if rt != c.refresh:
                    self.violations.append("%s: refresh token %r is not the current one" %
                                           (c.client_id, rt))
                    return self._json(400, {"error": "invalid_grant"})
                c.refresh = "rt-%s-%d-CANARY-rotated" % (cid, n)
                body["refresh_token"] = c.refresh
        body.update(c.answer)
        with self.lock:
            self.issued.append(body["access_token"])
            if "refresh_token" in body:
                self.issued.append(body["refresh_token"])
        return self._json(200, body)
