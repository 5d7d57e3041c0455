#!/usr/bin/env python3
"""Real clients through the explicit-proxy listener (SPEC §1 "explicit proxy"), each reaching a
rule's host with the secret injected and the answer passed back:
- curl driven by the environment only: HTTPS_PROXY/https_proxy for https://, http_proxy/
  HTTP_PROXY for http:// (absolute-form, which vaultgate carries to the rule's host over TLS;
  curl ignores the upper-case HTTP_PROXY, so both are set), NO_PROXY/no_proxy removed;
- Python: urllib with a ProxyHandler (https via CONNECT, http absolute-form) and http.client
  with set_tunnel;
- Node (when `node` is installed): http.request({method: 'CONNECT'}) by hand, then https over
  the tunnel's socket (Node 20 has no proxy support of its own).
Every client trusts only the run's CA (ca.pem), and only the proxy address is ever connected
to: no name is resolved by the client.

Why this can fail: a listener that did not speak CONNECT / absolute-form, a leaf the clients
reject, or a missing injection (each request's Authorization is checked at the upstream)."""
import json
import os
import shutil
import ssl
import subprocess
import http.client
import urllib.request
import vgtest as t

SECRET = "sk-canary-SECRET-api-0001"


def handler(req, ci):
    return [t.resp_bytes(200, b"hello " + req.target.encode())]


t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
up = t.FakeUpstream(certs["cert"], certs["key"], handler)
vg = t.Vaultgate(d, t.example_vault(), upstream_ca=certs["ca"], proxy=True,
                 pins=[up.pin("api.example.test")]).start()
PROXY = "http://127.0.0.1:%d" % vg.proxy_port
done = []


def upstream_saw(path, who):
    reqs = [r for r in up.requests if r.target == path]
    t.check(len(reqs) == 1, "%s: upstream saw %d requests for %s" % (who, len(reqs), path))
    t.check(reqs[0].header("Authorization") == ["Bearer " + SECRET],
            "%s: not injected: %r" % (who, reqs[0].header("Authorization")))
    done.append(who)


try:
    env = {k: v for k, v in os.environ.items()
           if k.lower() not in ("no_proxy", "all_proxy", "http_proxy", "https_proxy")}
    env.update(HTTPS_PROXY=PROXY, https_proxy=PROXY, HTTP_PROXY=PROXY, http_proxy=PROXY)
    for url, path in (("https://api.example.test/curl-https", "/curl-https"),
                      ("http://api.example.test/curl-http", "/curl-http")):
        p = subprocess.run(["curl", "-sS", "--max-time", "10", "--cacert", vg.ca,
                            "-H", "Authorization: Bearer placeholder", url],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        t.check(p.returncode == 0 and p.stdout == b"hello " + path.encode(),
                "curl %s: rc %d %r %r" % (url, p.returncode, p.stdout, p.stderr))
        upstream_saw(path, "curl " + url.split(":")[0])

    ctx = ssl.create_default_context(cafile=vg.ca)
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"https": PROXY, "http": PROXY}),
        urllib.request.HTTPSHandler(context=ctx))
    for url, path in (("https://api.example.test/urllib-https", "/urllib-https"),
                      ("http://api.example.test/urllib-http", "/urllib-http")):
        rq = urllib.request.Request(url, headers={"Authorization": "Bearer placeholder"})
        with opener.open(rq, timeout=10) as resp:
            body = resp.read()
        t.check(body == b"hello " + path.encode(), "urllib %s: %r" % (url, body))
        upstream_saw(path, "urllib " + url.split(":")[0])

    c = http.client.HTTPSConnection("127.0.0.1", vg.proxy_port, context=ctx, timeout=10)
    c.set_tunnel("api.example.test", 443)
    c.request("GET", "/set-tunnel", headers={"Authorization": "Bearer placeholder"})
    resp = c.getresponse()
    body = resp.read()
    c.close()
    t.check(resp.status == 200 and body == b"hello /set-tunnel", "set_tunnel: %d %r" %
            (resp.status, body))
    upstream_saw("/set-tunnel", "http.client set_tunnel")

    node = shutil.which("node")
    if node:
        js = r"""
const http = require('http'), https = require('https'), tls = require('tls'), fs = require('fs');
const port = +process.argv[1], ca = fs.readFileSync(process.argv[2]);
const c = http.request({host: '127.0.0.1', port, method: 'CONNECT', path: 'api.example.test:443',
                        headers: {host: 'api.example.test:443'}});
c.on('connect', (res, socket) => {
  if (res.statusCode !== 200) { console.error('CONNECT ' + res.statusCode); process.exit(2); }
  // port 443 must be explicit: with createConnection and no agent, Node's default port is 80
  // and it would send Host: api.example.test:80, which vaultgate rightly answers 421
  const r = https.request({host: 'api.example.test', port: 443, path: '/node',
                           headers: {Authorization: 'Bearer placeholder'},
                           createConnection: () => tls.connect({socket, ca,
                                                                servername: 'api.example.test'})},
    (res2) => { let b = ''; res2.on('data', (x) => b += x);
                res2.on('end', () => { console.log(res2.statusCode + ' ' + b); process.exit(0); }); });
  r.on('error', (e) => { console.error('request: ' + e.message); process.exit(3); });
  r.end();
});
c.on('error', (e) => { console.error('CONNECT: ' + e.message); process.exit(4); });
c.end();
setTimeout(() => { console.error('timeout'); process.exit(5); }, 10000);
"""
        p = subprocess.run([node, "-e", js, str(vg.proxy_port), vg.ca], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=20)
        t.check(p.returncode == 0 and p.stdout.strip() == b"200 hello /node",
                "node: rc %d %r %r" % (p.returncode, p.stdout, p.stderr))
        upstream_saw("/node", "node")
    else:
        t.log("note: node is not installed: the Node client part was skipped")
finally:
    vg.stop()
    up.stop()
t.check(SECRET not in vg.stderr(), "secret in the log")
t.log("clients through the proxy: %s" % ", ".join(done))
