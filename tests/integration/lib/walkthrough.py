"""walkthrough - runs a documented shell block as written (README.md, docs/gateway.md).

- block(doc, name): the ```sh block right after the line `<!-- walkthrough: NAME ... -->`.
- checkout(d, scripts): a stand-in for the reader's checkout: copies of the named scripts/,
  conf/ linked, the built binary at build/cli/vaultgate; its var/ is the case's own.
- run(script, d, subst, env, timeout, rename): bash -e runs the block with each `old` -> `new` of
  subst replaced (each must occur exactly once, so a changed doc fails loudly) and each `old` ->
  `new` of rename replaced wherever it occurs (at least once); stdout and stderr go to files (the
  block's background jobs keep what they inherit open). -> (exit code, out, err)
"""
import os
import re
import shutil
import subprocess

import vgtest as t


def block(doc, name):
    with open(os.path.join(t.SRC, doc)) as f:
        text = f.read()
    m = re.search(r"<!-- walkthrough: %s[^\n]*-->\n```sh\n(.*?)\n```" % re.escape(name), text,
                  re.S)
    t.check(m, "%s has no walk-through block %r" % (doc, name))
    return m.group(1)


def checkout(d, scripts):
    vg = os.path.join(d, "checkout")
    os.makedirs(os.path.join(vg, "scripts"))
    os.makedirs(os.path.join(vg, "build", "cli"))
    for f in scripts:
        shutil.copy2(os.path.join(t.SRC, "scripts", f), os.path.join(vg, "scripts", f))
    os.symlink(os.path.join(t.SRC, "conf"), os.path.join(vg, "conf"))
    os.symlink(t.VG_BIN, os.path.join(vg, "build", "cli", "vaultgate"))
    return vg


def run(script, d, subst, env=None, timeout=180, rename=()):
    for old, new in subst:
        t.check(script.count(old) == 1, "the block's %r line changed" % old)
        script = script.replace(old, new)
    for old, new in rename:
        t.check(old in script, "the block no longer names %r" % old)
        script = script.replace(old, new)
    out_p, err_p = os.path.join(d, "block.out"), os.path.join(d, "block.err")
    with open(out_p, "wb") as fo, open(err_p, "wb") as fe:
        r = subprocess.run(["bash", "-c", "set -e\n" + script], stdout=fo, stderr=fe, env=env,
                           timeout=timeout, cwd=d)
    with open(out_p, "rb") as fo, open(err_p, "rb") as fe:
        return r.returncode, fo.read().decode(errors="replace"), fe.read().decode(errors="replace")
