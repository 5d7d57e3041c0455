"""h2server - an HTTP/2 upstream for integration cases (Debian's python3-h2; run the case with
/usr/bin/python3, see need_h2()).

H2Upstream: a threaded TLS server on <random 127.x.y.z>:443 offering ALPN h2 (and http/1.1
only when asked, to play an HTTP/1.1-only server), recording each request (headers as a list of
(name, value), body bytes, trailers) and answering with handler(req) -> H2Answer. It is the other
side of the wire: the cases assert the exact fields it received.
"""
import os
import random
import socket
import ssl
import sys
import threading
import time


def need_h2():
    """Re-runs the case under /usr/bin/python3 when the h2 module is not importable here."""
    try:
        import h2  # noqa: F401
    except ImportError:
        if sys.executable != "/usr/bin/python3" and os.path.exists("/usr/bin/python3"):
            os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
        print("SKIP: python3-h2 is not installed", flush=True)
        sys.exit(77)


class H2Request:
    def __init__(self, stream_id, headers):
        self.stream_id = stream_id
        self.headers = headers
        self.body = b""
        self.trailers = []
        self.ended = False

    def header(self, name):
        return [v for n, v in self.headers if n == name]


class H2Answer:
    """status, headers [(n, v)], body chunks (each one DATA frame; ('sleep', s) pauses),
    trailers [(n, v)] or None, reset=True: RST_STREAM instead of an answer."""

    def __init__(self, status=200, headers=(), chunks=(b"ok",), trailers=None, reset=False):
        self.status, self.headers, self.chunks = status, list(headers), list(chunks)
        self.trailers, self.reset = trailers, reset


class H2Upstream:
    def __init__(self, cert, key, handler, alpn=("h2",), addr=None, port=443):
        import h2.config  # noqa: F401
        self.handler = handler
        self.requests = []
        self.errors = []
        self.accepts = 0
        self.lock = threading.Lock()
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.set_alpn_protocols(list(alpn))
        for _ in range(50):
            a = addr or "127.%d.%d.%d" % (random.randint(1, 254), random.randint(0, 255),
                                          random.randint(2, 254))
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((a, port))
            except OSError:
                s.close()
                continue
            self.sock, self.addr, self.port = s, a, port
            break
        self.sock.listen(128)
        self.stopped = False
        threading.Thread(target=self._accept, daemon=True).start()

    def pin(self, host):
        return "%s:%d:%s" % (host, self.port, self.addr)

    def stop(self):
        self.stopped = True
        try:
            self.sock.close()
        except OSError:
            pass

    def _accept(self):
        while not self.stopped:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            with self.lock:
                self.accepts += 1
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, raw):
        import h2.config
        import h2.connection
        import h2.events
        try:
            s = self.ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError) as e:
            self.errors.append("handshake: %s" % e)
            return
        if s.selected_alpn_protocol() != "h2":
            self.errors.append("alpn: %r" % s.selected_alpn_protocol())
            s.close()
            return
        conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, header_encoding="utf-8", validate_inbound_headers=True))
        conn.initiate_connection()
        wlock = threading.Lock()

        def flush():
            data = conn.data_to_send()
            if data:
                s.sendall(data)

        with wlock:
            flush()
        reqs = {}
        s.settimeout(30)
        try:
            while True:
                data = s.recv(65536)
                if not data:
                    return
                with wlock:
                    events = conn.receive_data(data)
                    for ev in events:
                        if isinstance(ev, h2.events.RequestReceived):
                            reqs[ev.stream_id] = H2Request(ev.stream_id, list(ev.headers))
                        elif isinstance(ev, h2.events.DataReceived):
                            reqs[ev.stream_id].body += ev.data
                            conn.acknowledge_received_data(ev.flow_controlled_length,
                                                           ev.stream_id)
                        elif isinstance(ev, h2.events.TrailersReceived):
                            reqs[ev.stream_id].trailers = list(ev.headers)
                        elif isinstance(ev, h2.events.StreamEnded):
                            r = reqs[ev.stream_id]
                            r.ended = True
                            with self.lock:
                                self.requests.append(r)
                            threading.Thread(target=self._answer, args=(conn, s, wlock, r),
                                             daemon=True).start()
                    flush()
        except (OSError, ssl.SSLError, Exception) as e:  # noqa: BLE001 - recorded for the case
            if not self.stopped:
                self.errors.append("serve: %r" % e)

    def _answer(self, conn, s, wlock, r):
        a = self.handler(r)
        with wlock:
            if a.reset:
                conn.reset_stream(r.stream_id)
                s.sendall(conn.data_to_send())
                return
            hdrs = [(":status", str(a.status))] + a.headers
            end_now = not a.chunks and a.trailers is None
            conn.send_headers(r.stream_id, hdrs, end_stream=end_now)
            s.sendall(conn.data_to_send())
        for i, ch in enumerate(a.chunks):
            if isinstance(ch, tuple):
                time.sleep(ch[1])
                continue
            last = i == len(a.chunks) - 1 and a.trailers is None
            sent = 0
            while sent < len(ch) or (len(ch) == 0 and sent == 0):
                with wlock:
                    window = min(conn.local_flow_control_window(r.stream_id),
                                 conn.max_outbound_frame_size)
                    if window <= 0 and len(ch) > 0:
                        pass
                    else:
                        piece = ch[sent:sent + max(window, 0)]
                        conn.send_data(r.stream_id, piece,
                                       end_stream=last and sent + len(piece) >= len(ch))
                        s.sendall(conn.data_to_send())
                        sent += len(piece)
                        if len(ch) == 0:
                            break
                        continue
                time.sleep(0.005)
        if a.trailers is not None:
            with wlock:
                conn.send_headers(r.stream_id, a.trailers, end_stream=True)
                s.sendall(conn.data_to_send())
