"""Network namespaces for catch-all tests: a sandbox namespace whose only route is a gateway
namespace, joined by a veth pair. Addresses exist only inside these namespaces; the gateway's
"uplink" is a veth pair that leads nowhere, so nothing can leave the machine. Everything is removed on close().

    with Topology() as t:
        t.gw("ip", "addr")            # run a command in the gateway namespace
        t.sb_popen([...])             # start a process in the sandbox namespace
"""
import ctypes
import os
import secrets
import shutil
import subprocess

SANDBOX_ADDR = "10.231.0.2"
GATEWAY_ADDR = "10.231.0.1"
UPLINK_ADDR = "10.231.1.1"
PREFIX = 30
# IPv6 on the same link, from a unique-local prefix (add_ipv6())
SANDBOX_ADDR6 = "fd00:231::2"
GATEWAY_ADDR6 = "fd00:231::1"
PREFIX6 = 64


CLONE_NEWNET = 0x40000000


def enter(ns):
    """Moves the calling thread into network namespace ns (by name). Call it before starting
    threads: threads and child processes created afterwards inherit the namespace."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open("/var/run/netns/" + ns, os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            e = ctypes.get_errno()
            raise OSError(e, "setns(%s): %s" % (ns, os.strerror(e)))
    finally:
        os.close(fd)


class Unavailable(Exception):
    """Namespaces cannot be created here (not root, no iproute2/nft, no netns support)."""


def _run(args, check=True, **kw):
    return subprocess.run(args, check=check, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          **kw)


class Topology:
    def __init__(self):
        if os.geteuid() != 0:
            raise Unavailable("network namespaces need root")
        for tool in ("ip", "nft"):
            if shutil.which(tool) is None:
                raise Unavailable("%s is not installed" % tool)
        tag = secrets.token_hex(3)
        self.sb_ns = "vgsb-" + tag
        self.gw_ns = "vggw-" + tag
        self.sb_if = "vsb" + tag
        self.gw_if = "vgw" + tag
        self.procs = []
        try:
            self._build()
        except (subprocess.CalledProcessError, OSError) as e:
            self.close()
            err = getattr(e, "stderr", b"") or b""
            raise Unavailable("cannot create namespaces: %s %s" % (e, err.decode(errors="replace")))

    def _build(self):
        _run(["ip", "netns", "add", self.sb_ns])
        _run(["ip", "netns", "add", self.gw_ns])
        _run(["ip", "link", "add", self.sb_if, "netns", self.sb_ns, "type", "veth", "peer",
              "name", self.gw_if, "netns", self.gw_ns])
        self.sb("ip", "link", "set", "lo", "up")
        self.gw("ip", "link", "set", "lo", "up")
        self.sb("ip", "addr", "add", "%s/%d" % (SANDBOX_ADDR, PREFIX), "dev", self.sb_if)
        self.gw("ip", "addr", "add", "%s/%d" % (GATEWAY_ADDR, PREFIX), "dev", self.gw_if)
        self.sb("ip", "link", "set", self.sb_if, "up")
        self.gw("ip", "link", "set", self.gw_if, "up")
        self.sb("ip", "route", "add", "default", "via", GATEWAY_ADDR)
        self.gw("sysctl", "-qw", "net.ipv4.ip_forward=1")
        # A stand-in uplink: a veth pair with both ends in the gateway and no address on the far
        # end, so forwarded packets reach the forward hook (as on a real gateway) and then go
        # nowhere: nothing answers ARP for them.
        self.gw("ip", "link", "add", "vgup0", "type", "veth", "peer", "name", "vgup1")
        self.gw("ip", "addr", "add", "%s/%d" % (UPLINK_ADDR, PREFIX), "dev", "vgup0")
        self.gw("ip", "link", "set", "vgup0", "up")
        self.gw("ip", "link", "set", "vgup1", "up")
        self.gw("ip", "route", "add", "default", "dev", "vgup0")
        # The redirect lands on 127.0.0.1-bound listeners only with route_localnet; the tests
        # bind 0.0.0.0, as docs/gateway.md tells operators to.

    def add_ipv6(self):
        """IPv6 beside IPv4: addresses on the veth pair (without duplicate address detection,
        so they are usable at once), the sandbox's default route through the gateway, and the
        gateway forwarding IPv6 to its dead-end uplink, as it does IPv4."""
        self.sb("ip", "-6", "addr", "add", "%s/%d" % (SANDBOX_ADDR6, PREFIX6), "dev", self.sb_if,
                "nodad")
        self.gw("ip", "-6", "addr", "add", "%s/%d" % (GATEWAY_ADDR6, PREFIX6), "dev", self.gw_if,
                "nodad")
        self.sb("ip", "-6", "route", "add", "default", "via", GATEWAY_ADDR6)
        self.gw("sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
        self.gw("ip", "-6", "route", "add", "default", "dev", "vgup0")

    def exec_args(self, ns, args):
        return ["ip", "netns", "exec", ns] + list(args)

    def sb(self, *args, check=True, **kw):
        return _run(self.exec_args(self.sb_ns, args), check=check, **kw)

    def gw(self, *args, check=True, **kw):
        return _run(self.exec_args(self.gw_ns, args), check=check, **kw)

    def sb_popen(self, args, **kw):
        p = subprocess.Popen(self.exec_args(self.sb_ns, args), **kw)
        self.procs.append(p)
        return p

    def gw_popen(self, args, **kw):
        p = subprocess.Popen(self.exec_args(self.gw_ns, args), **kw)
        self.procs.append(p)
        return p

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        for ns in (getattr(self, "sb_ns", None), getattr(self, "gw_ns", None)):
            if ns:
                _run(["ip", "netns", "pids", ns], check=False)
                _run(["ip", "netns", "del", ns], check=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
