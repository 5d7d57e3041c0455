/*
 * secretsrc.h - reading secret sources at load time (policy-internal): environment variables
 * (read once, then removed from the environment) and files (capped, regular files only).
 */
#ifndef VG_SECRETSRC_H
#define VG_SECRETSRC_H

#include <stddef.h>

/*
 * A copy (secmem, free with secmem_free(len + 1)) of the variable's value; the variable is then
 * removed from the environment, its entries (name and value) overwritten where they lie. A variable
 * already removed by an earlier load (SIGHUP reload) is served from a process-wide memo. Call from
 * the thread that owns the environment. Returns 0, or -1 when the variable is not set (or memory
 * runs out); *out is written only on success.
 */
int secretsrc_env_take(const char *name, char **out, size_t *outlen);

/*
 * Reads at most cap bytes of the regular file at path into a new NUL-terminated buffer (free
 * with secmem_free(cap + 2)). Returns 0, -2 when the file is larger than cap, or -1, with a
 * reason (strerror text, "not a regular file", "larger than N bytes") in why.
 */
int secretsrc_read_file(const char *path, size_t cap, char **out, size_t *outlen, char *why,
                        size_t whylen);

#endif
