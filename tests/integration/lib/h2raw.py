"""h2raw - an HTTP/2 client that sends what it is told, valid or not (Debian's python3-h2 and
its hyperframe, outbound validation off), for the validation and flood cases. Run under
/usr/bin/python3 (h2server.need_h2()).
"""
import socket
import ssl
import time


class Conn:
    def __init__(self, port, ca, sni="api.example.test", timeout=10):
        import h2.config
        import h2.connection
        ctx = ssl.create_default_context(cafile=ca)
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.s = ctx.wrap_socket(raw, server_hostname=sni)
        assert self.s.selected_alpn_protocol() == "h2", self.s.selected_alpn_protocol()
        self.h2 = h2.connection.H2Connection(h2.config.H2Configuration(
            client_side=True, header_encoding="utf-8", validate_outbound_headers=False,
            normalize_outbound_headers=False, validate_inbound_headers=False))
        self.h2.initiate_connection()
        self.flush()
        self.events = []
        self.goaway = None
        self.closed = False

    def flush(self):
        data = self.h2.data_to_send()
        if data:
            self.s.sendall(data)

    def raw(self, frame_bytes):
        """Sends bytes as they are (frames built with hyperframe), around h2's own state."""
        self.flush()
        self.s.sendall(frame_bytes)

    def request(self, headers, body=None, end=True):
        sid = self.h2.get_next_available_stream_id()
        self.h2.send_headers(sid, headers, end_stream=end and body is None)
        if body is not None:
            self.h2.send_data(sid, body, end_stream=end)
        self.flush()
        return sid

    def pump(self, until, timeout=5.0):
        """Reads and handles events until until(self) is true, EOF or timeout."""
        import h2.events
        import h2.exceptions
        deadline = time.monotonic() + timeout
        while not until(self) and time.monotonic() < deadline and not self.closed:
            self.s.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data = self.s.recv(65536)
            except (socket.timeout, ssl.SSLError, OSError):
                break
            if not data:
                self.closed = True
                break
            try:
                evs = self.h2.receive_data(data)
            except h2.exceptions.ProtocolError:
                self.closed = True
                break
            for ev in evs:
                self.events.append(ev)
                if isinstance(ev, h2.events.ConnectionTerminated):
                    self.goaway = ev.error_code
                if isinstance(ev, h2.events.DataReceived):
                    self.h2.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            try:
                self.flush()
            except OSError:
                self.closed = True
        return until(self)

    def outcome(self, sid, timeout=5.0):
        """(status or None, reset error code or None, body bytes) of stream sid."""
        import h2.events

        def done(c):
            for ev in c.events:
                if getattr(ev, "stream_id", None) == sid and isinstance(
                        ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                    return True
            return c.goaway is not None
        self.pump(done, timeout)
        status, reset, body = None, None, b""
        for ev in self.events:
            if getattr(ev, "stream_id", None) != sid:
                continue
            if isinstance(ev, h2.events.ResponseReceived):
                status = int(dict(ev.headers)[":status"])
            elif isinstance(ev, h2.events.DataReceived):
                body += ev.data
            elif isinstance(ev, h2.events.StreamReset):
                reset = int(ev.error_code)
        return status, reset, body

    def close(self):
        try:
            self.s.close()
        except OSError:
            pass
