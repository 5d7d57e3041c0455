/*
 * trustfiles.h - the files that make a sandbox trust the per-run root: the bundle, the root
 * alone, the Java truststore, the wgetrc, and the environment lines that point runtimes at them
 * (SPEC §2, §11); `vaultgate trust` and `vaultgate run --trust-out` (SPEC §13) write the same.
 */
#ifndef VG_TRUSTFILES_H
#define VG_TRUSTFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#define TRUSTFILES_DEFAULT_ROOTS   "/etc/ssl/certs/ca-certificates.crt"
#define TRUSTFILES_CA_MAX_BYTES    (1024 * 1024)
#define TRUSTFILES_ROOTS_MAX_BYTES (64 * 1024 * 1024)

/* The absolute paths of what trustfiles_write() wrote; trustfiles_free() frees them. */
struct trustfiles {
    char *bundle, *ca, *p12, *wgetrc;
};

/* Reads at most max bytes of path into a NUL-terminated buffer the caller frees. NULL + err. */
char *trustfiles_read(const char *path, size_t max, size_t *len, char *err, size_t errlen);

/* <directory of path>/name; the caller frees. NULL when out of memory. */
char *trustfiles_beside(const char *path, const char *name);

/* Whether a and b name the same file (by name, or by device and inode when both exist). */
bool trustfiles_same(const char *a, const char *b);

/*
 * Writes, each 0644 and atomically: bundle (root, rlen bytes of PEM, then the system roots read
 * from roots_path), ca.pem beside it (the root alone; skipped when root_path, the file root was
 * read from, is that file already; NULL when the root came from memory), truststore.p12 and
 * wgetrc beside it. The root must be the checked certificate alone. Fills *out on success.
 * 0 or -1 + err (a file could not be read or written).
 */
int trustfiles_write(const char *root, size_t rlen, const char *root_path, const char *bundle,
                     const char *roots_path, struct trustfiles *out, char *err, size_t errlen);

/* Prints the `export NAME=value` lines for t to out, as `vaultgate trust` does. 0 or -1. */
int trustfiles_print_env(FILE *out, const struct trustfiles *t);

/* Writes the same lines to path, 0644 and atomically (trust.env). 0 or -1 + err. */
int trustfiles_write_env(const struct trustfiles *t, const char *path, char *err, size_t errlen);

/* Frees the paths in t and zeroes it. */
void trustfiles_free(struct trustfiles *t);

#endif
