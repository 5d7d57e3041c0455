/*
 * vaultwatch.c - inotify on the vault for `vaultgate run --vault-watch` (SPEC §13).
 *
 * Guarantees: every way a vault file is replaced ends in an event this module reports - a
 * rewrite in place (IN_CLOSE_WRITE on the file or its name), a rename over the name (editors,
 * `mv`, config management), a symlink swapped in the directory (Kubernetes renames `..data`
 * over the old link when a mounted Secret or ConfigMap changes), the file removed (the reload
 * then fails and the old policy stays) - and a lost queue (IN_Q_OVERFLOW) counts as a change.
 * Other names in the directory are ignored. Nothing here reads the vault: the reload does.
 */
#include "cli/vaultwatch.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

/* The name the Kubernetes atomic writer swaps in a mounted volume's directory. */
#define VAULTWATCH_K8S_DATA "..data"

#define VAULTWATCH_DIR_MASK                                                                        \
    (IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB |            \
     IN_DELETE_SELF | IN_MOVE_SELF)
#define VAULTWATCH_FILE_MASK (IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF)

struct vaultwatch {
    int fd;
    int dir_wd;
    int file_wd; /* -1 while the path resolves to nothing */
    char *path;
    const char *base; /* the last component of path */
    int64_t due_ms;   /* -1: no change pending */
    int64_t last_ms;  /* the last reload; INT64_MIN before the first */
};

/* Watches the file path resolves to now, dropping the watch on the one it resolved to before. */
static void watch_file(struct vaultwatch *w)
{
    char *real = realpath(w->path, NULL);
    int wd = real != NULL ? inotify_add_watch(w->fd, real, VAULTWATCH_FILE_MASK) : -1;

    free(real);
    if (w->file_wd >= 0 && w->file_wd != wd && w->file_wd != w->dir_wd)
        inotify_rm_watch(w->fd, w->file_wd); /* fails harmlessly when the file went away */
    w->file_wd = wd;
}

struct vaultwatch *vaultwatch_open(const char *path, char *err, size_t errlen)
{
    struct vaultwatch *w = calloc(1, sizeof(*w));
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];

    if (w == NULL || (w->path = strdup(path)) == NULL) {
        snprintf(err, errlen, "--vault-watch: out of memory");
        goto fail;
    }
    w->fd = -1;
    w->file_wd = -1;
    w->due_ms = -1;
    w->last_ms = INT64_MIN;
    w->base = slash != NULL ? w->path + (slash - path) + 1 : w->path;
    if (slash == NULL)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == path)
        snprintf(dir, sizeof(dir), "/");
    else if ((size_t)(slash - path) < sizeof(dir))
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    else {
        snprintf(err, errlen, "--vault-watch: the vault's directory name is too long");
        goto fail;
    }
    if (w->base[0] == '\0') {
        snprintf(err, errlen, "--vault-watch: %s names a directory, not a file", path);
        goto fail;
    }
    w->fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->fd < 0) {
        snprintf(err, errlen, "--vault-watch: inotify: %s", strerror(errno));
        goto fail;
    }
    w->dir_wd = inotify_add_watch(w->fd, dir, VAULTWATCH_DIR_MASK | IN_ONLYDIR);
    if (w->dir_wd < 0) {
        snprintf(err, errlen, "--vault-watch: cannot watch %s: %s", dir, strerror(errno));
        goto fail;
    }
    watch_file(w);
    return w;
fail:
    vaultwatch_free(&w);
    return NULL;
}

void vaultwatch_free(struct vaultwatch **wp)
{
    struct vaultwatch *w = *wp;

    if (w == NULL)
        return;
    if (w->fd >= 0)
        close(w->fd);
    free(w->path);
    free(w);
    *wp = NULL;
}

int vaultwatch_fd(const struct vaultwatch *w)
{
    return w->fd;
}

/* Whether one event concerns the vault. */
static bool relevant(struct vaultwatch *w, const struct inotify_event *ev)
{
    if (ev->mask & IN_Q_OVERFLOW)
        return true; /* events were lost: one of them may have been ours */
    if (ev->wd == w->file_wd) {
        if (ev->mask & IN_IGNORED) {
            w->file_wd = -1; /* the file is gone; vaultwatch_done() watches its successor */
            return false;
        }
        return true;
    }
    if (ev->wd != w->dir_wd)
        return false; /* a file watch dropped before, still draining */
    if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF))
        return true;
    if (ev->len == 0)
        return false;
    return strcmp(ev->name, w->base) == 0 || strcmp(ev->name, VAULTWATCH_K8S_DATA) == 0;
}

int vaultwatch_read(struct vaultwatch *w)
{
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    int changed = 0;

    for (;;) {
        ssize_t n = read(w->fd, buf, sizeof(buf));

        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return changed;
        if (n <= 0)
            return -1;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)(void *)p;

            if (relevant(w, ev))
                changed = 1;
            p += sizeof(*ev) + ev->len;
        }
    }
}

void vaultwatch_changed(struct vaultwatch *w, int64_t now_ms)
{
    int64_t due = now_ms + VAULTWATCH_DEBOUNCE_MS;

    if (w->due_ms >= 0)
        return; /* a window is open: this change goes with it */
    if (w->last_ms != INT64_MIN && w->last_ms + VAULTWATCH_DEBOUNCE_MS > due)
        due = w->last_ms + VAULTWATCH_DEBOUNCE_MS;
    w->due_ms = due;
}

int vaultwatch_timeout(const struct vaultwatch *w, int64_t now_ms)
{
    if (w->due_ms < 0)
        return -1;
    if (w->due_ms <= now_ms)
        return 0;
    return w->due_ms - now_ms > INT_MAX ? INT_MAX : (int)(w->due_ms - now_ms);
}

void vaultwatch_done(struct vaultwatch *w, int64_t now_ms)
{
    w->due_ms = -1;
    w->last_ms = now_ms;
    watch_file(w);
}
