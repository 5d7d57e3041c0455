"""h2server - an HTTP/2 upstream for integration cases (Debian's python3-h2; run the case with
/usr/bin/python3, see need_h2()).

H2Upstream: a threaded TLS server on <random 127.x.y.z>:443 offering ALPN h2 (and http/1.1
only when asked, to play an HTTP/1.1-only server), recording each request (headers as a list of
(name, value), body bytes, trailers, the connection it came on) and answering with
handler(req) -> H2Answer. It is the other side of the wire: the cases assert the exact fields it
received. Per connection it counts the streams and the most that were open at once, and keeps
the server name it was reached by (.conns); max_streams sets SETTINGS_MAX_CONCURRENT_STREAMS,
which python-h2 then enforces from the first frame on: a client opening one stream too many
kills that connection, and the case sees it in .errors. handshake_delay holds each TLS handshake
back that long (a slow dial). early(req) -> True answers that request as soon as its head is in,
before its body ended (and never resets it: the client is left to end or cancel it).
hold_window=S: every stream's window starts shut (INITIAL_WINDOW_SIZE 0) and opens S seconds
after its head arrived, so a request body piles up in the client first.
"""
import os
import random
import select
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
    def __init__(self, stream_id, headers, conn):
        self.stream_id = stream_id
        self.headers = headers
        self.conn = conn  # index of the connection it came on (0 for the first)
        self.body = b""
        self.trailers = []
        self.ended = False
        self.reset_by_client = None  # RST_STREAM error code from the client, if any
        self.early = False  # answered before its body ended
        self.done = False   # no longer counted as open

    def header(self, name):
        return [v for n, v in self.headers if n == name]


class H2Answer:
    """status, headers [(n, v)], body chunks (each one DATA frame; ('sleep', s) pauses,
    ('reset', code) sends RST_STREAM there and ends the answer), trailers [(n, v)] or None,
    reset=True: RST_STREAM instead of an answer, goaway=True: GOAWAY (NO_ERROR, last stream =
    this one) right after the head, so that a client holding the whole answer has read it; the
    connection stays open, and a stream the client opens on it later is an error."""

    def __init__(self, status=200, headers=(), chunks=(b"ok",), trailers=None, reset=False,
                 goaway=False):
        self.status, self.headers, self.chunks = status, list(headers), list(chunks)
        self.trailers, self.reset, self.goaway = trailers, reset, goaway


class H2ConnInfo:
    def __init__(self, index):
        self.index = index
        self.streams = 0  # requests received
        self.open = 0     # streams open now (request received, answer not ended)
        self.peak = 0     # the most open at once
        self.goaway = None  # the last stream id of the GOAWAY sent, if one was
        self.sni = None     # the server name the client sent


class H2Upstream:
    def __init__(self, cert, key, handler, alpn=("h2",), addr=None, port=443, max_streams=None,
                 handshake_delay=0, early=None, hold_window=None):
        import h2.config  # noqa: F401
        self.handler = handler
        self.hold_window = hold_window
        self.early = early
        self.handshake_delay = handshake_delay
        self.requests = []
        self.errors = []
        self.accepts = 0
        self.conns = []
        self.max_streams = max_streams
        self.lock = threading.Lock()
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(cert, key)
        self.ctx.set_alpn_protocols(list(alpn))
        self.ctx.sni_callback = self._sni
        self.sock = None
        for _ in range(50):
            a = addr or "127.%d.%d.%d" % (random.randint(1, 254), random.randint(0, 255),
                                          random.randint(2, 254))
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind((a, port))
            except OSError:
                s.close()
                if addr:
                    raise
                continue
            self.sock, self.addr, self.port = s, a, port
            break
        if self.sock is None:
            raise OSError("no free loopback address for the h2 upstream")
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
                info = H2ConnInfo(len(self.conns))
                self.conns.append(info)
            threading.Thread(target=self._serve, args=(c, info), daemon=True).start()

    @staticmethod
    def _sni(sslsock, name, ctx):
        sslsock.vg_sni = name

    def _stream_done(self, info, r):
        with self.lock:
            if not r.done:
                r.done = True
                info.open -= 1

    def _serve(self, raw, info):
        """One connection. Only this thread touches the TLS socket (OpenSSL does not take a
        read in one thread and a write in another at once): the answer threads change the h2
        state under the lock, queue what they want sent, and wake this one."""
        import h2.config
        import h2.connection
        import h2.settings
        time.sleep(self.handshake_delay)
        try:
            s = self.ctx.wrap_socket(raw, server_side=True)
        except (OSError, ssl.SSLError) as e:
            self.errors.append("handshake: %s" % e)
            return
        info.sni = getattr(s, "vg_sni", None)
        if s.selected_alpn_protocol() != "h2":
            self.errors.append("alpn: %r" % s.selected_alpn_protocol())
            s.close()
            return
        conn = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=False, header_encoding="utf-8", validate_inbound_headers=True))
        settings = {}
        if self.max_streams is not None:
            settings[h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS] = self.max_streams
        if self.hold_window is not None:
            settings[h2.settings.SettingCodes.INITIAL_WINDOW_SIZE] = 0
        if settings:
            conn.local_settings = h2.settings.Settings(client=False, initial_values=settings)
        conn.initiate_connection()
        wake_r, wake_w = socket.socketpair()
        wake_r.setblocking(False)
        wake_w.setblocking(False)
        out = _Out(conn, wake_w)
        reqs = {}
        s.setblocking(False)
        try:
            while True:
                _send_all(s, out.take())
                try:
                    data = s.recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError):
                    if not select.select([s, wake_r], [], [], 60)[0]:
                        raise TimeoutError("idle for 60 s")
                    try:
                        wake_r.recv(4096)
                    except BlockingIOError:
                        pass
                    continue
                if not data:
                    return
                with out.lock:
                    for ev in conn.receive_data(data):
                        self._event(ev, reqs, out, info)
                    out.queue()
        except Exception as e:  # noqa: BLE001 - recorded for the case
            if not self.stopped:
                import traceback
                self.errors.append("serve: %r %s" % (e, traceback.format_exc()[-600:]))
        finally:
            out.closed = True
            for x in (s, wake_r, wake_w):
                try:
                    x.close()
                except OSError:
                    pass

    def _event(self, ev, reqs, out, info):
        """One h2 event of a connection (out.lock held)."""
        import h2.events
        r = reqs.get(getattr(ev, "stream_id", None))
        if isinstance(ev, h2.events.RequestReceived):
            r = reqs[ev.stream_id] = H2Request(ev.stream_id, list(ev.headers), info.index)
            if info.goaway is not None and ev.stream_id > info.goaway:
                self.errors.append("stream %d opened after GOAWAY" % ev.stream_id)
            with self.lock:
                info.streams += 1
                info.open += 1
                info.peak = max(info.peak, info.open)
            if self.early is not None and self.early(r):
                r.early = True
                self._start(r, out, info)
            if self.hold_window is not None:
                threading.Timer(self.hold_window, self._open_window, (out, r)).start()
        elif isinstance(ev, h2.events.DataReceived):
            if r is not None:
                r.body += ev.data
            out.conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
        elif isinstance(ev, h2.events.TrailersReceived) and r is not None:
            r.trailers = list(ev.headers)
        elif isinstance(ev, h2.events.StreamReset) and r is not None:
            self._stream_done(info, r)
            r.reset_by_client = int(ev.error_code)
        elif isinstance(ev, h2.events.StreamEnded) and r is not None:
            r.ended = True
            if not r.early:
                self._start(r, out, info)

    @staticmethod
    def _open_window(out, r):
        import h2.exceptions
        with out.lock:
            try:
                out.conn.increment_flow_control_window(1 << 24, r.stream_id)
                out.queue()
            except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
                pass  # the stream is over already

    def _start(self, r, out, info):
        with self.lock:
            self.requests.append(r)
        threading.Thread(target=self._answer, args=(out, r, info), daemon=True).start()

    def _answer(self, out, r, info):
        import h2.exceptions
        try:
            self._answer_stream(out, r, info)
        except (h2.exceptions.StreamClosedError, OSError):
            pass  # the client reset the stream, or the connection went away
        finally:
            self._stream_done(info, r)

    def _answer_stream(self, out, r, info):
        conn = out.conn
        a = self.handler(r)
        with out.lock:
            if a.reset:
                conn.reset_stream(r.stream_id)
                out.queue()
                return
            hdrs = [(":status", str(a.status))] + a.headers
            end_now = not a.chunks and a.trailers is None
            conn.send_headers(r.stream_id, hdrs, end_stream=end_now)
            out.queue()
            if a.goaway:
                # beside h2's state machine, which would refuse to send the rest after it
                from hyperframe.frame import GoAwayFrame
                info.goaway = r.stream_id
                out.queue(GoAwayFrame(0, last_stream_id=r.stream_id, error_code=0).serialize())
        last_data = max([i for i, c in enumerate(a.chunks) if not isinstance(c, tuple)],
                        default=-1)
        resets = any(isinstance(c, tuple) and c[0] == "reset" for c in a.chunks)
        for i, ch in enumerate(a.chunks):
            if isinstance(ch, tuple) and ch[0] == "sleep":
                time.sleep(ch[1])
                continue
            if isinstance(ch, tuple) and ch[0] == "reset":
                with out.lock:
                    conn.reset_stream(r.stream_id, error_code=ch[1])
                    out.queue()
                return
            last = i == last_data and a.trailers is None and not resets
            sent = 0
            while sent < len(ch) or (len(ch) == 0 and sent == 0):
                with out.lock:
                    if r.reset_by_client is not None or out.closed:
                        return
                    window = min(conn.local_flow_control_window(r.stream_id),
                                 conn.max_outbound_frame_size)
                    if window > 0 or len(ch) == 0:
                        piece = ch[sent:sent + max(window, 0)]
                        conn.send_data(r.stream_id, piece,
                                       end_stream=last and sent + len(piece) >= len(ch))
                        out.queue()
                        sent += len(piece)
                        if len(ch) == 0:
                            break
                        continue
                time.sleep(0.005)
        if a.trailers is not None:
            with out.lock:
                conn.send_headers(r.stream_id, a.trailers, end_stream=True)
                out.queue()


class _Out:
    """What a connection's threads want sent, in order, for its one I/O thread to send."""

    def __init__(self, conn, wake):
        self.conn, self.wake = conn, wake
        self.lock = threading.Lock()
        self.buf = bytearray()
        self.closed = False

    def queue(self, raw=b""):
        """(lock held) Takes what h2 has to send, then raw bytes, and wakes the I/O thread."""
        self.buf += self.conn.data_to_send() + raw
        try:
            self.wake.send(b"x")
        except OSError:
            pass

    def take(self):
        with self.lock:
            self.buf += self.conn.data_to_send()
            data, self.buf = bytes(self.buf), bytearray()
        return data


def _send_all(s, data):
    """Writes all of data to the non-blocking TLS socket s."""
    view = memoryview(data)
    while view:
        try:
            view = view[s.send(view):]
        except (ssl.SSLWantWriteError, BlockingIOError):
            select.select([], [s], [], 5)
        except ssl.SSLWantReadError:
            select.select([s], [], [], 5)
