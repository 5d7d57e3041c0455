#!/usr/bin/env python3
"""A small authoritative DNS server for tests, on loopback only.

Answers A and AAAA queries from a zone given as NAME=ADDR[,ADDR...] arguments (or a JSON file
mapping names to lists of addresses); a name may also map to a sequence of answers that rotate
per query (`--rebind NAME=FIRST;SECOND`) to test DNS rebinding. Unknown names get NXDOMAIN.
TTL 0 so resolvers ask again. Usable as a module (DnsServer) or a script:

    dnsserver.py --listen 127.0.0.1:0 --port-file F api.test=127.0.0.3 v6.test=::1
"""
import argparse
import ipaddress
import json
import os
import socket
import struct
import sys
import threading


def _parse_name(msg, off):
    labels = []
    while True:
        n = msg[off]
        if n == 0:
            return ".".join(labels).lower(), off + 1
        if n & 0xC0:
            raise ValueError("compression in question")
        labels.append(msg[off + 1:off + 1 + n].decode("ascii", "replace"))
        off += 1 + n


class DnsServer:
    def __init__(self, zone=None, rebind=None, host="127.0.0.1", port=0):
        self.zone = {k.lower().rstrip("."): list(v) for k, v in (zone or {}).items()}
        self.rebind = {k.lower().rstrip("."): [list(a) for a in v] for k, v in (rebind or {}).items()}
        self.counts = {}
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind((host, port))
        self.addr = self.sock.getsockname()
        self._stop = False
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self._stop = True
        self.sock.close()

    @property
    def server(self):
        return "%s:%d" % self.addr

    def answers(self, name):
        if name in self.rebind:
            seq = self.rebind[name]
            i = self.counts.get(name, 0)
            self.counts[name] = i + 1
            return seq[min(i, len(seq) - 1)]
        self.counts[name] = self.counts.get(name, 0) + 1
        return self.zone.get(name)

    def _reply(self, q):
        qid, flags, qd = struct.unpack("!HHH", q[:6])
        name, off = _parse_name(q, 12)
        qtype, qclass = struct.unpack("!HH", q[off:off + 4])
        question = q[12:off + 4]
        addrs = self.answers(name)
        rcode = 0 if addrs is not None else 3
        rrs = []
        for a in addrs or []:
            ip = ipaddress.ip_address(a)
            if qtype == 1 and ip.version == 4:
                rrs.append(struct.pack("!HHHIH", 0xC00C, 1, 1, 0, 4) + ip.packed)
            elif qtype == 28 and ip.version == 6:
                rrs.append(struct.pack("!HHHIH", 0xC00C, 28, 1, 0, 16) + ip.packed)
        rflags = 0x8400 | (flags & 0x0100) | rcode
        head = struct.pack("!HHHHHH", qid, rflags, 1, len(rrs), 0, 0)
        return head + question + b"".join(rrs)

    def _serve(self):
        while not self._stop:
            try:
                q, peer = self.sock.recvfrom(4096)
            except OSError:
                return
            try:
                self.sock.sendto(self._reply(q), peer)
            except (ValueError, IndexError, struct.error, OSError):
                continue


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", default="127.0.0.1:0")
    ap.add_argument("--port-file")
    ap.add_argument("--zone-file")
    ap.add_argument("--rebind", action="append", default=[])
    ap.add_argument("records", nargs="*")
    args = ap.parse_args()
    host, port = args.listen.rsplit(":", 1)
    if not ipaddress.ip_address(host).is_loopback:
        sys.exit("dnsserver: listen address must be loopback")
    zone = {}
    if args.zone_file:
        with open(args.zone_file) as f:
            zone.update(json.load(f))
    for r in args.records:
        k, v = r.split("=", 1)
        zone[k] = v.split(",")
    rebind = {}
    for r in args.rebind:
        k, v = r.split("=", 1)
        rebind[k] = [s.split(",") for s in v.split(";")]
    srv = DnsServer(zone, rebind, host, int(port)).start()
    if args.port_file:
        with open(args.port_file + ".tmp", "w") as f:  # renamed: a reader sees all or nothing
            f.write("%d\n" % srv.addr[1])
        os.rename(args.port_file + ".tmp", args.port_file)
    print("dnsserver on %s" % srv.server, flush=True)
    try:
        srv.thread.join()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
