/*
 * vaultwatch.h - `vaultgate run --vault-watch`: notice that the vault file changed (SPEC §13).
 *
 * inotify on the directory that holds the vault (a rename over it, a symlink swapped, as
 * Kubernetes does with `..data` when a mounted Secret or ConfigMap changes) and on the file the
 * path resolves to (a rewrite in place, wherever a symlink points). The owner polls the
 * descriptor on the main thread, feeds what it reads to the debounce, and reloads (cli/reload.h)
 * when vaultwatch_timeout() says 0: at most once per VAULTWATCH_DEBOUNCE_MS of changes, the
 * first change of a burst reloaded VAULTWATCH_DEBOUNCE_MS after it.
 */
#ifndef VG_VAULTWATCH_H
#define VG_VAULTWATCH_H

#include <stddef.h>
#include <stdint.h>

#define VAULTWATCH_DEBOUNCE_MS 200

struct vaultwatch;

/* Watches path's directory and the file it resolves to. NULL + err (the directory cannot be
 * watched: missing, no inotify). The file itself may be missing for now. */
struct vaultwatch *vaultwatch_open(const char *path, char *err, size_t errlen);

/* Closes the descriptor, frees *w and NULLs it; NULL is fine. */
void vaultwatch_free(struct vaultwatch **w);

/* The inotify descriptor (non-blocking, close-on-exec) to poll for input. */
int vaultwatch_fd(const struct vaultwatch *w);

/* Reads every queued event: 1 when one of them concerns the vault, 0 when none did (another
 * file in the directory), -1 on a read error. Never blocks. */
int vaultwatch_read(struct vaultwatch *w);

/* A change seen at now_ms (CLOCK_MONOTONIC milliseconds): opens the debounce window unless one
 * is open already. */
void vaultwatch_changed(struct vaultwatch *w, int64_t now_ms);

/* Milliseconds until the reload is due (a poll timeout): 0 when due now, -1 when no change is
 * pending. */
int vaultwatch_timeout(const struct vaultwatch *w, int64_t now_ms);

/* The reload ran at now_ms: closes the window and watches the file the path resolves to now (a
 * swapped symlink points elsewhere). */
void vaultwatch_done(struct vaultwatch *w, int64_t now_ms);

#endif
