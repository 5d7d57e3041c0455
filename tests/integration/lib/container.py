"""container - the image cases' fixture: Podman as Debian 12 runs it here, a Debian 12 base image
made locally with mmdebstrap (no registry is reachable), and the images built from it.

It installs nothing (scripts/deps installs podman, runc and mmdebstrap): a missing command fails
the case. A case is skipped (77) only when Podman itself cannot run a container on this machine.

- podman(*args): Podman 4.3 as it runs here: `--runtime runc --cgroup-manager cgroupfs`, with a
  containers.conf (CONTAINERS_CONF) that sets `[containers] default_ulimits = []`.
- base_image(): the bookworm base (mmdebstrap variant `apt`: Essential packages and apt, from
  Debian's mirror), built once into a tarball under /var/tmp keyed by BASE_KEY (the fixture's
  version and the month: a new month brings Debian's updates), reused between runs, imported
  once per key. A lock keeps parallel cases from building it twice.
- vaultgate_image(): deploy/container/Containerfile built with BASE pointing at it
  (`--format docker` keeps the HEALTHCHECK; `--network host`: the build's apt-get reaches the
  mirror without a bridge network). Podman's layer cache makes a second build of the same
  checkout cheap. Returns (tag, seconds the build took).
- tools_image(): curl and python3 on the same base: the sandbox client and the upstream stub of
  the pod cases.

Traffic stays on loopback: containers run with `--network host` on 127.x addresses or in a pod
whose containers talk over the pod's own loopback; Podman's bridge network is never used.
"""
import fcntl
import glob
import os
import subprocess
import sys
import tempfile
import time

import vgtest as t

BASE_VERSION = 1
BASE_KEY = "bookworm-apt-v%d-%s" % (BASE_VERSION, time.strftime("%Y-%m"))
CACHE = os.environ.get("VG_CONTAINER_CACHE", "/var/tmp/vaultgate-containers")
BASE_TAG = "localhost/vaultgate-test-base:" + BASE_KEY
IMAGE_TAG = "localhost/vaultgate:test"
TOOLS_TAG = "localhost/vaultgate-test-tools:" + BASE_KEY
MIRRORS = ["deb http://deb.debian.org/debian bookworm main",
           "deb http://deb.debian.org/debian bookworm-updates main",
           "deb http://deb.debian.org/debian-security bookworm-security main"]
TOOLS_CONTAINERFILE = """ARG BASE
FROM ${BASE}
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \\
    --no-install-recommends curl python3-minimal ca-certificates >/dev/null \\
    && rm -rf /var/lib/apt/lists/*
"""

_conf = None


def _containers_conf():
    global _conf
    if _conf is None:
        _conf = os.path.join(t.tmpdir(), "containers.conf")
        with open(_conf, "w") as f:
            # Podman 4.3's default ulimits ask for more than these machines allow
            f.write("[containers]\ndefault_ulimits = []\n")
    return _conf


def podman_argv(*args):
    return ["podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs"] + list(args)


def podman(*args, check=True, timeout=600, input=None):
    """Runs podman; returns the CompletedProcess (stdout and stderr as text)."""
    env = dict(os.environ, CONTAINERS_CONF=_containers_conf())
    p = subprocess.run(podman_argv(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       env=env, timeout=timeout, input=input)
    p.stdout, p.stderr = p.stdout.decode("utf-8", "replace"), p.stderr.decode("utf-8", "replace")
    if check and p.returncode != 0:
        t.fail("podman %s: exit %d:\n%s" % (" ".join(args[:3]), p.returncode, p.stderr[-3000:]))
    return p


def require():
    """Fails for a missing command (scripts/deps installs it); skips unless root, and in the
    sanitizer pass (the image builds its own binary). Returns nothing."""
    for cmd in ("podman", "runc", "mmdebstrap"):
        if subprocess.run(["sh", "-c", "command -v " + cmd], stdout=subprocess.DEVNULL).returncode:
            t.fail("%s is missing: run scripts/deps" % cmd)
    if os.geteuid() != 0:
        t.skip("the image cases run Podman as root")
    if os.environ.get("ASAN_OPTIONS") or os.environ.get("UBSAN_OPTIONS"):
        # the image builds its own release binary from the source tree: a sanitizer pass
        # would build and test the very same image again
        t.skip("sanitizer pass: the image builds its own binary; the plain pass covers it")


def _build_base_tarball(path):
    tmp = path + ".tmp"
    cmd = ["mmdebstrap", "--variant=apt", "--mode=root", "--format=tar", "--quiet",
           # like debian:bookworm-slim: no manuals, no translations, copyright files kept
           "--dpkgopt=path-exclude=/usr/share/man/*", "--dpkgopt=path-exclude=/usr/share/doc/*",
           "--dpkgopt=path-include=/usr/share/doc/*/copyright",
           "--dpkgopt=path-exclude=/usr/share/locale/*", "bookworm", tmp] + MIRRORS
    t0 = time.monotonic()
    p = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, timeout=1800)
    if p.returncode != 0:
        if os.path.exists(tmp):
            os.unlink(tmp)
        t.fail("mmdebstrap: exit %d:\n%s" % (p.returncode, p.stdout.decode()[-3000:]))
    os.rename(tmp, path)
    t.log("base tarball built in %.0f s: %s" % (time.monotonic() - t0, path))


def base_image():
    """The local bookworm base image's tag (built and imported on first use)."""
    require()
    os.makedirs(CACHE, exist_ok=True)
    tar = os.path.join(CACHE, BASE_KEY + ".tar")
    with open(os.path.join(CACHE, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(tar):
            for old in glob.glob(os.path.join(CACHE, "bookworm-*.tar*")):
                os.unlink(old)
            _build_base_tarball(tar)
        if podman("image", "exists", BASE_TAG, check=False).returncode != 0:
            podman("import", "--change", "CMD [\"/bin/bash\"]", tar, BASE_TAG)
    _can_run(BASE_TAG)
    return BASE_TAG


def _can_run(tag):
    """Skips the case when Podman cannot run a container at all here (kernel, cgroups, overlay),
    with what it said."""
    p = podman("run", "--rm", "--network", "host", tag, "/bin/true", check=False, timeout=120)
    if p.returncode != 0:
        t.skip("podman cannot run a container on this machine: " + p.stderr.strip()[-500:])


def _build(tag, containerfile, context, base):
    t0 = time.monotonic()
    podman("build", "--format", "docker", "--network", "host", "--build-arg", "BASE=" + base,
           "-f", containerfile, "-t", tag, context, timeout=3600)
    return time.monotonic() - t0


def vaultgate_image():
    """(tag, build seconds) of deploy/container/Containerfile built from this checkout."""
    base = base_image()
    secs = _build(IMAGE_TAG, os.path.join(t.SRC, "deploy", "container", "Containerfile"), t.SRC,
                  base)
    t.log("vaultgate image built in %.1f s" % secs)
    return IMAGE_TAG, secs


def tools_image():
    """The tag of an image with curl and python3 on the same base."""
    base = base_image()
    d = tempfile.mkdtemp(prefix="tools-", dir=t.tmpdir())
    with open(os.path.join(d, "Containerfile"), "w") as f:
        f.write(TOOLS_CONTAINERFILE)
    _build(TOOLS_TAG, os.path.join(d, "Containerfile"), d, base)
    return TOOLS_TAG


def image_size_mb(tag):
    size = int(podman("image", "inspect", "--format", "{{.Size}}", tag).stdout.strip())
    return size / 1e6


def inspect(what, fmt):
    return podman("inspect", "--format", fmt, what).stdout.strip()


def remove(*names):
    """Removes containers or pods by name, whatever their state (for finally: blocks)."""
    for n in names:
        podman("rm", "--force", "--ignore", n, check=False, timeout=120)


if __name__ == "__main__":
    # `python3 tests/integration/lib/container.py` builds (or reuses) the base and the image
    print(vaultgate_image(), file=sys.stderr)
