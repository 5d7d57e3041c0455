#!/usr/bin/env python3
"""README's injection walk-through, run as written: the block under the marker
`<!-- walkthrough: injection` is taken from README.md and run by bash with two changes only:
`VG=` names a copy of the checkout's scripts/ and conf/ (so its var/ is the case's own, and
VAULTGATE_BIN makes scripts/run-example use the built binary instead of building),
and /tmp/vg-demo is the case's temp dir. The block stands in its demo directory and hands scripts/run-example and
scripts/echo-server paths relative to it (--upstream-ca test-ca.pem), as a reader would: they
must resolve where the reader stands, not in the checkout. It runs in its own network namespace
(the walk-through uses fixed ports and 127.0.0.3:443). The echo server must have received the
example vault's key in place of the placeholder - it comes back masked, as many stars as the key
is long - the blocked host gets vaultgate's 403, and the audit store lists it; the key itself
appears nowhere in the output."""
import os
import re

import vgtest as t
import walkthrough

KEY = "sk-example-FAKE-not-a-real-key-0000"


def main():
    t.require_binary()
    if not t.isolate_net():
        t.skip("needs a network namespace of its own (fixed ports)")
    d = t.tmpdir()
    vg = walkthrough.checkout(d, ("run-example", "echo-server", "deps", "build"))
    demo = os.path.join(d, "demo")
    rc, out, err = walkthrough.run(walkthrough.block("README.md", "injection"), d,
                                   [("VG=/path/to/vaultgate", "VG=" + vg),
                                    ("demo=/tmp/vg-demo", "demo=" + demo)],
                                   env=dict(os.environ, VAULTGATE_BIN=t.VG_BIN), timeout=120)
    t.check(rc == 0, "the walk-through failed (%d):\n%s\n%s" % (rc, out[-2000:], err[-2000:]))
    t.check(KEY not in out + err, "the key is in the walk-through's output")
    with open(os.path.join(demo, "vaultgate.log")) as f:
        t.check(KEY not in f.read(), "the key is in vaultgate's log")
    t.check(re.search(r'"Authorization: Bearer \*{%d}"' % len(KEY), out),
            "the echo did not show the injected key masked:\n%s" % out[:1500])
    t.check("Bearer placeholder" not in out, "the placeholder reached the echo server")
    t.check("host blocked by policy" in out or "blocked.example.test" in out,
            "no 403 body for the blocked host:\n%s" % out[-800:])
    t.check(re.search(r"blocked\.example\.test\s", out.split("host blocked by policy")[-1]),
            "vaultgate audit does not list the blocked host:\n%s" % out[-800:])
    t.log("ok README walk-through: injected, masked in the echo, blocked, audited")


if __name__ == "__main__":
    main()
