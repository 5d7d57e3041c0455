#!/usr/bin/env python3
"""Binary metadata masking (SPEC §4, §10), with Debian's python3-grpcio on both sides over TLS: a
gRPC server on a rule host puts the request's `authorization` metadata, inside other bytes, into
binary metadata - an `x-debug-bin` header (initial metadata), an `x-debug-bin` trailer, and the
`grpc-status-details-bin` trailer of an error status - which gRPC sends base64-encoded. The
grpcio client, calling through vaultgate, decodes bytes that hold '*' where the bearer was and
every other byte as the server sent it; the secret reaches the client in no metadata and no
message, and the log never holds it.

Why this can fail: a masker that reads header values as text finds neither the secret nor its
base64 spelling in base64 of `<bytes>Bearer <secret>`, so the client decodes the full bearer."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
try:
    import grpc  # noqa: F401
except ImportError:
    if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    print("SKIP: python3-grpcio is not installed", flush=True)
    sys.exit(77)
from concurrent import futures  # noqa: E402

import grpc  # noqa: E402,F811
import vgtest as t  # noqa: E402

SECRET = "sk-canary-BIN-api-0042"
seen_auth = []


def auth_of(ctx):
    md = dict(ctx.invocation_metadata())
    seen_auth.append(md.get("authorization", ""))
    return md.get("authorization", "").encode()


def wrapped(a, n):
    """The authorization value inside other bytes, n of them before it (every alignment)."""
    return b"\x0a\xff\x00\x7f"[:n % 4] + b"\x12" * (n // 4) + a + b"\x00\xfe"


def debug(req, ctx):
    a = auth_of(ctx)
    n = int(req or b"0")
    ctx.send_initial_metadata((("x-debug-bin", wrapped(a, n + 1)),))
    ctx.set_trailing_metadata((("x-debug-bin", wrapped(a, n)),))
    return b"ok"


def fail(req, ctx):
    a = auth_of(ctx)
    n = int(req or b"0")
    ctx.set_trailing_metadata((("grpc-status-details-bin", wrapped(a, n)),))
    ctx.abort(grpc.StatusCode.PERMISSION_DENIED, "denied")


handlers = grpc.method_handlers_generic_handler("echo.Echo", {
    "Debug": grpc.unary_unary_rpc_method_handler(debug),
    "Fail": grpc.unary_unary_rpc_method_handler(fail),
})

t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test"])
server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
server.add_generic_rpc_handlers((handlers,))
addr = "127.%d.%d.%d" % (os.getpid() % 200 + 20, os.getpid() // 200 % 250, 9)
with open(certs["key"], "rb") as f:
    key = f.read()
with open(certs["cert"], "rb") as f:
    crt = f.read()
server.add_secure_port("%s:443" % addr, grpc.ssl_server_credentials(((key, crt),)))
server.start()
vault = t.example_vault(secrets={"API_KEY": {"value": SECRET}}, rules=[
    {"host_pattern": "api.example.test", "secret": "API_KEY", "scheme": "bearer"}])
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"],
                 pins=["api.example.test:443:" + addr]).start()
bad = []
want_auth = b"Bearer " + SECRET.encode()
masked = b"Bearer " + b"*" * len(SECRET)
try:
    with open(vg.ca, "rb") as f:
        root = f.read()
    ch = grpc.secure_channel("127.0.0.1:%d" % vg.port, grpc.ssl_channel_credentials(root),
                             options=(("grpc.ssl_target_name_override", "api.example.test"),
                                      ("grpc.default_authority", "api.example.test")))
    md = (("authorization", "Bearer placeholder"),)
    for n in range(6):
        resp, call = ch.unary_unary("/echo.Echo/Debug").with_call(str(n).encode(), metadata=md,
                                                                  timeout=10)
        if seen_auth[-1] != want_auth.decode():
            bad.append("call %d: not injected (test broken)" % n)
        got = {"header": dict(call.initial_metadata()).get("x-debug-bin"),
               "trailer": dict(call.trailing_metadata()).get("x-debug-bin")}
        for where, val in got.items():
            want = wrapped(masked, n + 1 if where == "header" else n)
            if val != want:
                bad.append("call %d: %s x-debug-bin decodes to %d bytes%s, not the masked echo" %
                           (n, where, len(val or b""),
                            " holding the secret" if val and SECRET.encode() in val else ""))
        try:
            ch.unary_unary("/echo.Echo/Fail")(str(n).encode(), metadata=md, timeout=10)
            bad.append("call %d: the error status did not come through" % n)
        except grpc.RpcError as e:
            det = dict(e.trailing_metadata() or ()).get("grpc-status-details-bin")
            if e.code() != grpc.StatusCode.PERMISSION_DENIED:
                bad.append("call %d: code %r" % (n, e.code()))
            if det != wrapped(masked, n):
                bad.append("call %d: grpc-status-details-bin decodes to %d bytes%s, not the "
                           "masked echo" % (n, len(det or b""), " holding the secret"
                                            if det and SECRET.encode() in det else ""))
    ch.close()
finally:
    vg.stop()
    server.stop(0)
log = vg.stderr()
if SECRET in log:
    bad.append("the secret is in the log")
if bad:
    t.fail("\n  ".join(["%d problem(s):" % len(bad)] + bad))
