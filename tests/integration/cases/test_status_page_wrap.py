#!/usr/bin/env python3
"""The status page never breaks the audit store's path inside a word (SPEC §7: it reads well
from 360 px to a desktop screen). Chromium lays out a copy of the page vaultgate served - its
own HTML and stylesheet, plus a measuring script the test adds (the page itself has none) - at
1280 px and at 360 px, for an SQLite store whose path needs several lines in its card: every
line break inside the path falls right after a `/`, it scrolls only when one piece is wider
than the card, and nothing spills over a neighbour."""
import json
import os
import re

import browser
import vgtest as t

MEASURE = """<script>
window.addEventListener('load', function () {
  var dd = document.getElementById('audit-store'), chars = [];
  var w = document.createTreeWalker(dd, NodeFilter.SHOW_TEXT), n;
  while ((n = w.nextNode())) {
    for (var i = 0; i < n.data.length; i++) {
      var r = document.createRange();
      r.setStart(n, i); r.setEnd(n, i + 1);
      var rs = r.getClientRects();
      chars.push([n.data[i], rs.length ? rs[0].top : null]);
    }
  }
  var breaks = [];
  for (var k = 1; k < chars.length; k++) {
    if (chars[k][1] !== null && chars[k - 1][1] !== null && chars[k][1] > chars[k - 1][1] + 1)
      breaks.push(chars[k - 1][0] + '|' + chars[k][0]);
  }
  var box = dd.getBoundingClientRect(), sec = dd.closest('section').getBoundingClientRect();
  var code = dd.querySelector('code').getBoundingClientRect();
  var pieces = Array.prototype.map.call(dd.querySelectorAll('code span'), function (s) {
    return [s.textContent, s.getBoundingClientRect().width];
  });
  var out = {text: dd.textContent, pieces: pieces, breaks: breaks, lines: breaks.length + 1,
             overflowX: getComputedStyle(dd).overflowX, scrollW: dd.scrollWidth,
             clientW: dd.clientWidth, codeRight: code.right, boxRight: box.right,
             sectionRight: sec.right};
  var p = document.createElement('pre');
  p.id = 'measure'; p.textContent = JSON.stringify(out);
  document.body.appendChild(p);
});
</script>"""

if not browser.chromium():
    t.skip("chromium is not installed")
t.require_binary()
d = t.tmpdir()
# a path of several ordinary pieces, none wider than a card
deep = os.path.join(d, "state-of-the-egress-gateway", "for-the-status-page", "run-directory")
os.makedirs(deep)
vg = t.Vaultgate(deep, t.example_vault(), audit="sqlite").start()
try:
    st, html = vg.admin_get("/")
    t.check(st == 200, "/ answered %d" % st)
    st, css = vg.admin_get("/status.css")
    t.check(st == 200, "/status.css answered %d" % st)
    store = vg.status()["audit"]["store"]
finally:
    vg.stop()
page = html.decode()
page = page.replace('<link rel="stylesheet" href="/status.css">',
                    "<style>\n%s</style>" % css.decode())
page = re.sub(r'<meta http-equiv="refresh"[^>]*>', "", page)
page = page.replace("</body>", MEASURE + "\n</body>")
local = os.path.join(d, "page.html")
with open(local, "w") as f:
    f.write(page)
for width in (1280, 360):
    browser_dom = browser.Dom(browser.dump_dom("file://" + local, width))
    m = browser_dom.by_id.get("measure")
    t.check(m is not None, "%d px: the measuring script did not run" % width)
    got = json.loads(m.text)
    t.check(got["text"] == store, "%d px: shown %r, status says %r" % (width, got["text"], store))
    if width == 1280:
        t.check(got["lines"] > 1, "1280 px: the path fits one line, so this case proves "
                "nothing: %r" % got)
    mid = [b for b in got["breaks"] if not b.startswith("/|")]
    t.check(not mid, "%d px: the path breaks inside a word at %r (all breaks %r)" %
            (width, mid, got["breaks"]))
    # it scrolls only for a piece wider than the card (the case's own temp dir may be one)
    wide = [p for p in got["pieces"] if p[1] > got["clientW"]]
    t.check(got["scrollW"] <= got["clientW"] or wide, "%d px: the path is cut off though every "
            "piece fits: %r" % (width, got))
    spills = got["codeRight"] > got["sectionRight"] + 0.5
    t.check(not spills or got["overflowX"] in ("auto", "scroll"),
            "%d px: the path spills out of its card without scrolling: %r" % (width, got))
    t.log("ok %d px: %d lines, breaks %r, overflow-x %s" % (width, got["lines"], got["breaks"],
                                                           got["overflowX"]))
