/*
 * scope.h - the scope of a rule (SPEC §3 "Scope"): the methods and path prefixes it admits, and
 * the canonical-path rule that guards hosts with path scopes. Pure functions: no I/O, no
 * allocation.
 */
#ifndef VG_SCOPE_H
#define VG_SCOPE_H

#include <stdbool.h>
#include <stddef.h>

/* Longest method token and path prefix a vault may name. */
#define SCOPE_METHOD_MAX 32
#define SCOPE_PATH_MAX   1024

/* 1 when m is a method a scope may list (an RFC 9110 token without lower-case letters, at most
 * SCOPE_METHOD_MAX bytes, not CONNECT or TRACE); else 0 with a reason in *why. */
int scope_method_ok(const char *m, const char **why);

/* How many bytes of a request target are its path (everything before '?' or '#'). */
size_t scope_path_len(const char *target, size_t len);

/*
 * 1 when the path (len bytes as the client sent them) is canonical: no dot segment ("." or
 * "..", also before a ';' parameter), no backslash, no "%2e", "%2f", "%5c" or "%00" in any
 * letter case, and every '%' followed by two hex digits. Else 0 with a fixed reason in *why.
 */
int scope_path_canonical(const char *path, size_t len, const char **why);

/* A canonical path is decoded for matching with pct_decode(out, path, len, 0) (common/pct.h). */

/* 1 when the decoded path equals the decoded prefix or continues it at a segment boundary
 * ("/repos/acme" admits "/repos/acme" and "/repos/acme/x", not "/repos/acme-evil"). */
int scope_prefix_admits(const char *prefix, size_t plen, const char *path, size_t len);

#endif
