"""browser - Debian's headless Chromium for the status-page cases (python3 standard library only).

- chromium(): the binary, or None when it is not installed.
- dump_dom(url, width, height): the DOM Chromium built from the page (after the load event),
  serialised, laid out in a window of that size (1280 x 900 unless given).
- screenshot(url, path, width, height): a PNG of the viewport.
- Dom(html): elements by id (tag, attributes, text content) and tag counts.
- png_pixels(path): (width, height, rows of (r, g, b)) from a PNG, decoded with zlib.

Network rule: Chromium runs with background networking off and a host resolver that answers
nothing but loopback literals, so it never resolves or contacts a real name.
"""
import html.parser
import os
import shutil
import struct
import subprocess
import tempfile
import zlib


def chromium():
    for name in ("chromium", "chromium-browser"):
        p = shutil.which(name)
        if p:
            return p
    return None


def _args(extra, width=1280, height=900):
    prof = tempfile.mkdtemp(prefix="vg-chromium-")
    return [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
            "--no-first-run", "--disable-background-networking", "--disable-component-update",
            "--disable-sync", "--disable-extensions", "--disable-default-apps",
            "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "--user-data-dir=" + prof, "--hide-scrollbars", "--force-device-scale-factor=1",
            "--window-size=%d,%d" % (width, height)] + list(extra), prof


def _run(extra, width=1280, height=900, timeout=60):
    args, prof = _args(extra, width, height)
    try:
        r = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout)
    finally:
        shutil.rmtree(prof, ignore_errors=True)
    return r


def dump_dom(url, width=1280, height=900):
    r = _run(["--dump-dom", url], width, height)
    if r.returncode != 0:
        raise RuntimeError("chromium --dump-dom exited %d: %s" %
                           (r.returncode, r.stderr.decode(errors="replace")[-2000:]))
    return r.stdout.decode("utf-8", "replace")


def screenshot(url, path, width, height):
    r = _run(["--screenshot=" + path, url], width, height)
    if r.returncode != 0 or not os.path.exists(path):
        raise RuntimeError("chromium --screenshot exited %d: %s" %
                           (r.returncode, r.stderr.decode(errors="replace")[-2000:]))
    return path


class Element:
    def __init__(self, tag, attrs):
        self.tag, self.attrs, self.text, self.children = tag, dict(attrs), "", []

    def find_all(self, tag):
        out = []
        for c in self.children:
            if c.tag == tag:
                out.append(c)
            out.extend(c.find_all(tag))
        return out


VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
        "track", "wbr"}


class Dom(html.parser.HTMLParser):
    """Elements by id, every element of a tag, and each element's text content."""

    def __init__(self, text):
        super().__init__(convert_charrefs=True)
        self.root = Element("#root", [])
        self.stack = [self.root]
        self.by_id = {}
        self.tags = {}
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        e = Element(tag, attrs)
        self.stack[-1].children.append(e)
        self.tags.setdefault(tag, []).append(e)
        if "id" in e.attrs:
            self.by_id[e.attrs["id"]] = e
        if tag not in VOID:
            self.stack.append(e)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        for e in self.stack[1:]:
            e.text += data

    def text(self, id_):
        e = self.by_id.get(id_)
        return None if e is None else " ".join(e.text.split())


def png_pixels(path, max_rows=None):
    """Decodes an 8-bit RGB or RGBA, non-interlaced PNG (what Chromium writes); only the first
    max_rows rows when given (each row needs only the one above it)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError("unsupported PNG (depth %d, type %d)" % (depth, ctype))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev, i = [], bytearray(stride), 0
    for _ in range(h if max_rows is None else min(h, max_rows)):
        ft, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - bpp] if x >= bpp else 0
            b = prev[x]
            c = prev[x - bpp] if x >= bpp else 0
            if ft == 1:
                line[x] = (line[x] + a) & 255
            elif ft == 2:
                line[x] = (line[x] + b) & 255
            elif ft == 3:
                line[x] = (line[x] + (a + b) // 2) & 255
            elif ft == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append([tuple(line[x:x + 3]) for x in range(0, stride, bpp)])
        prev = line
    return w, h, rows


def colour_count(rows, rgb):
    return sum(1 for r in rows for px in r if px == rgb)
