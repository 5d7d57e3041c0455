"""A decoy resolver for the catch-all DNS cases: UDP and TCP port 53 on each given address (in
the namespace the calling thread is in), counting every datagram and every connection, and
answering any query with one A record, DECOY_ANSWER, so a query that reached it would also
show in the client's answer. With the gateway holding DNS it must count nothing."""
import socket
import struct
import threading

DECOY_ANSWER = "203.0.113.66"


def _answer(q):
    """q is a DNS query; a response with q's question and one A record (or None)."""
    if len(q) < 12:
        return None
    off = 12
    while off < len(q) and q[off] != 0:
        off += 1 + q[off]
    off += 5
    if off > len(q):
        return None
    head = q[:2] + b"\x81\x80" + b"\x00\x01\x00\x01\x00\x00\x00\x00"
    rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 5, 4) + socket.inet_aton(DECOY_ANSWER)
    return head + q[12:off] + rr


class DecoyResolver:
    def __init__(self, addrs):
        self.udp_packets = 0
        self.tcp_connections = 0
        self.lock = threading.Lock()
        self.socks = []
        for a in addrs:
            u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            u.bind((a, 53))
            t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            t.bind((a, 53))
            t.listen(8)
            self.socks += [u, t]
            threading.Thread(target=self._udp, args=(u,), daemon=True).start()
            threading.Thread(target=self._tcp, args=(t,), daemon=True).start()

    def seen(self):
        with self.lock:
            return self.udp_packets + self.tcp_connections

    def _udp(self, s):
        while True:
            try:
                q, peer = s.recvfrom(4096)
            except OSError:
                return
            with self.lock:
                self.udp_packets += 1
            a = _answer(q)
            if a:
                s.sendto(a, peer)

    def _tcp(self, s):
        while True:
            try:
                c, _ = s.accept()
            except OSError:
                return
            with self.lock:
                self.tcp_connections += 1
            try:
                c.settimeout(5)
                n = struct.unpack(">H", c.recv(2))[0]
                a = _answer(c.recv(n))
                if a:
                    c.sendall(struct.pack(">H", len(a)) + a)
            except (OSError, struct.error):
                pass
            c.close()

    def close(self):
        for s in self.socks:
            s.close()
