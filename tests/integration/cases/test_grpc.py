#!/usr/bin/env python3
"""gRPC through vaultgate with injection (SPEC §10), with Debian's python3-grpcio on both sides
over TLS: unary, server-, client- and bidirectional streaming; the bearer secret injected into
the metadata the server sees; an echo of it masked in messages and in trailing metadata; a
server error status and message passed through; and a gRPC call to an upstream that speaks only
HTTP/1.1 answered at once with UNAVAILABLE (grpc-status 14), never translated.

Why this can fail: a proxy that forces HTTP/1.1 breaks gRPC outright; one that masks DATA frame
by frame lets a secret cut across frames through; one that drops trailers loses the status."""
import os
import sys
import time

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

SECRET = "sk-canary-SECRET-api-0001"
STARS = b"*" * len(SECRET)
seen_auth = []


def auth_of(ctx):
    md = dict(ctx.invocation_metadata())
    seen_auth.append(md.get("authorization", ""))
    return md.get("authorization", "").encode()


def unary(req, ctx):
    ctx.set_trailing_metadata((("x-echo", auth_of(ctx).decode()),))
    return b"unary:" + req + b":" + auth_of(ctx)


def server_stream(req, ctx):
    a = auth_of(ctx)
    for i in range(5):
        # the secret cut into pieces spread over messages: each message masked whole
        yield b"msg-%d " % i + (a if i == 2 else b"x" * 40)


def client_stream(it, ctx):
    a = auth_of(ctx)
    return b"|".join(it) + b"|" + a


def bidi(it, ctx):
    a = auth_of(ctx)
    for m in it:
        yield m + b" " + a


def fail(req, ctx):
    auth_of(ctx)
    ctx.abort(grpc.StatusCode.PERMISSION_DENIED, "nope " + SECRET)


ident = dict(request_deserializer=None, response_serializer=None)
handlers = grpc.method_handlers_generic_handler("echo.Echo", {
    "Unary": grpc.unary_unary_rpc_method_handler(unary),
    "ServerStream": grpc.unary_stream_rpc_method_handler(server_stream),
    "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
    "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
    "Fail": grpc.unary_unary_rpc_method_handler(fail),
})

t.require_binary()
d = t.tmpdir()
certs = t.make_certs(d, ["api.example.test", "old.example.test"])
server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
server.add_generic_rpc_handlers((handlers,))
addr = "127.%d.%d.%d" % (os.getpid() % 200 + 20, os.getpid() // 200 % 250, 7)
with open(certs["key"], "rb") as f:
    key = f.read()
with open(certs["cert"], "rb") as f:
    crt = f.read()
server.add_secure_port("%s:443" % addr, grpc.ssl_server_credentials(((key, crt),)))
server.start()
old = t.FakeUpstream(certs["cert"], certs["key"], lambda r, c: [t.resp_bytes(200, b"h1 only")])
vault = t.example_vault(rules=[
    {"host_pattern": "api.example.test", "secret": "API_KEY", "scheme": "bearer"},
    {"host_pattern": "old.example.test", "secret": "API_KEY", "scheme": "bearer"}])
vg = t.Vaultgate(d, vault, upstream_ca=certs["ca"],
                 pins=["api.example.test:443:" + addr, old.pin("old.example.test")]).start()
try:
    with open(vg.ca, "rb") as f:
        root = f.read()

    def channel(name):
        return grpc.secure_channel("127.0.0.1:%d" % vg.port, grpc.ssl_channel_credentials(root),
                                   options=(("grpc.ssl_target_name_override", name),
                                            ("grpc.default_authority", name)))

    ch = channel("api.example.test")
    md = (("authorization", "Bearer placeholder"),)
    u = ch.unary_unary("/echo.Echo/Unary")
    resp, call = u.with_call(b"hello", metadata=md, timeout=10)
    t.check(resp == b"unary:hello:Bearer " + STARS, "unary %r" % resp)
    t.check(dict(call.trailing_metadata()).get("x-echo") == "Bearer " + "*" * len(SECRET),
            "trailing metadata %r" % (call.trailing_metadata(),))
    t.check(seen_auth[-1] == "Bearer " + SECRET, "not injected: %r" % seen_auth[-1][:20])
    got = list(ch.unary_stream("/echo.Echo/ServerStream")(b"go", metadata=md, timeout=10))
    t.check(len(got) == 5 and got[2] == b"msg-2 Bearer " + STARS, "server stream %r" % got)
    resp = ch.stream_unary("/echo.Echo/ClientStream")(iter([b"a", b"b", b"c"]), metadata=md,
                                                        timeout=10)
    t.check(resp == b"a|b|c|Bearer " + STARS, "client stream %r" % resp)
    got = list(ch.stream_stream("/echo.Echo/Bidi")(iter([b"one", b"two"]), metadata=md,
                                                    timeout=10))
    t.check(got == [b"one Bearer " + STARS, b"two Bearer " + STARS], "bidi %r" % got)
    try:
        ch.unary_unary("/echo.Echo/Fail")(b"x", metadata=md, timeout=10)
        t.fail("the error status did not come through")
    except grpc.RpcError as e:
        t.check(e.code() == grpc.StatusCode.PERMISSION_DENIED, "code %r" % e.code())
        t.check(e.details() == "nope " + "*" * len(SECRET), "details %r" % e.details())
    t.check(all(a == "Bearer " + SECRET for a in seen_auth), "a call went without the secret")
    # an HTTP/1.1-only upstream: UNAVAILABLE at once, nothing translated
    t0 = time.monotonic()
    try:
        channel("old.example.test").unary_unary("/echo.Echo/Unary")(b"x", metadata=md, timeout=10)
        t.fail("a gRPC call went to an HTTP/1.1 upstream")
    except grpc.RpcError as e:
        took = time.monotonic() - t0
        t.check(e.code() == grpc.StatusCode.UNAVAILABLE, "code %r" % e.code())
        t.check(took < 8, "UNAVAILABLE after %.1f s" % took)  # before a 10 s timeout could end it
    t.check(not old.requests, "the gRPC request reached the HTTP/1.1 upstream")
    ch.close()
finally:
    vg.stop()
    server.stop(0)
    old.stop()
log = vg.stderr()
t.check(SECRET not in log, "secret in the log")
t.check('"proto":"h2"' in log, "no h2 request line")
