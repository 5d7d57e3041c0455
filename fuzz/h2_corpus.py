#!/usr/bin/python3
"""Writes the seed corpus of fuzz_h2 (fuzz/corpus/h2/): client connections built with Debian's
python3-h2, each prefixed with fuzz_h2's two option bytes. Run: /usr/bin/python3 fuzz/h2_corpus.py"""
import os

import h2.config
import h2.connection
from hyperframe.frame import ContinuationFrame, HeadersFrame, PriorityFrame, RstStreamFrame

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "h2")


def conn():
    c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, validate_outbound_headers=False,
                                                             header_encoding="utf-8"))
    c.initiate_connection()
    return c


def seeds(host):
    BASE = [(":method", "GET"), (":scheme", "https"), (":authority", host), (":path", "/echo")]
    c = conn()
    c.send_headers(1, BASE, end_stream=True)
    yield "get", c.data_to_send()

    c = conn()
    c.send_headers(1, [(":method", "POST")] + BASE[1:] + [("content-length", "5")])
    c.send_data(1, b"hello", end_stream=True)
    yield "post", c.data_to_send()

    c = conn()
    c.send_headers(1, [(":method", "POST")] + BASE[1:3] + [(":path", "/pkg.Svc/Echo"),
                   ("content-type", "application/grpc"), ("te", "trailers")])
    c.send_data(1, b"\x00\x00\x00\x00\x05hello")
    c.send_headers(1, [("x-end", "1")], end_stream=True)
    yield "grpc", c.data_to_send()

    c = conn()
    for sid in (1, 3, 5):
        c.send_headers(sid, BASE, end_stream=True)
    c.reset_stream(3)
    yield "streams_reset", c.data_to_send()

    c = conn()
    c.send_headers(1, BASE[:2] + [(":authority", "blocked.test"), (":path", "/")],
                   end_stream=True)
    c.send_headers(3, [(":method", "CONNECT"), (":authority", host + ":443")], end_stream=True)
    yield "refusals", c.data_to_send()

    c = conn()
    block = c.encoder.encode(BASE + [("x-long", "v" * 300)])
    raw = c.data_to_send()
    raw += HeadersFrame(1, data=block[:20], flags=["END_STREAM"]).serialize()
    raw += ContinuationFrame(1, data=block[20:], flags=["END_HEADERS"]).serialize()
    raw += PriorityFrame(3, depends_on=1, stream_weight=8).serialize()
    raw += RstStreamFrame(1, error_code=8).serialize()
    yield "continuation_priority", raw

    c = conn()
    c.send_headers(1, [(":method", "GET"), (":scheme", "https"), (":path", "/q?x=1")] +
                   [("host", host), ("cookie", "a=1"), ("cookie", "b=2"),
                    ("range", "bytes=0-3")], end_stream=True)
    yield "host_cookie_range", c.data_to_send()


os.makedirs(OUT, exist_ok=True)
for host, h2up in (("up.test", 0x00), ("h2.test", 0x10)):  # an HTTP/1.1 and an h2 upstream
    for name, raw in seeds(host):
        for opt in (0x00, 0x02):  # whole, then in pieces of 7 bytes
            with open(os.path.join(OUT, "%s-%d" % (name, opt | h2up)), "wb") as f:
                f.write(bytes([opt | h2up, 6]) + raw)
