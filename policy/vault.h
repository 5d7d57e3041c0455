/*
 * vault.h - the vault file (SPEC §3) as a validated, immutable struct: JSON in, struct vault
 * out, or one error line that names the JSON path. Internal to policy/: the rest of the program
 * sees the vault only through struct policy (policy.h).
 */
#ifndef VG_VAULT_H
#define VG_VAULT_H

#include <stdbool.h>
#include <stddef.h>

#include "policy/hostmatch.h"
#include "policy/policy.h"

/* An oauth2 secret source (SPEC §3 "OAuth 2.0 access tokens"). */
struct vault_oauth {
    char *token_url; /* as written */
    char *host;      /* normalised */
    int port;        /* 443 unless the URL names one */
    char *target;    /* origin-form path[?query] of the token endpoint */
    bool refresh_grant;
    bool auth_post; /* client_auth "post" (else "basic") */
    char *client_id;
    char *scope;    /* or NULL */
    char *audience; /* or NULL */
    char *cs_name;  /* client_secret and refresh_token as written, or NULL */
    char *rt_name;
    size_t client_secret; /* index into secrets, or SIZE_MAX */
    size_t refresh_token; /* index into secrets, or SIZE_MAX */
};

struct vault_secret {
    char *name;
    char *value; /* secmem: wiped on free; NUL-terminated, never contains NUL; NULL for oauth2 */
    size_t len;
    bool used;                 /* some rule or oauth2 source names it */
    struct vault_oauth *oauth; /* an oauth2 source: the value is fetched at run time */
};

struct vault_rule {
    char *pattern; /* as written */
    struct hostmatch *match;
    size_t secret; /* index into secrets */
    enum policy_scheme scheme;
    char *name;     /* header or query parameter name (header, query), else NULL */
    char *username; /* basic only, else NULL */
    /* scope (SPEC §3): no methods (paths) means every method (path) */
    char **methods; /* distinct upper-case tokens */
    size_t nmethods;
    char **paths;      /* prefixes as written */
    char **paths_dec;  /* the same percent-decoded once, what requests are compared with */
    size_t *paths_len; /* decoded lengths */
    size_t npaths;
    /* sigv4 only, else NULL */
    char *access_key_id;
    char *region;
    char *service;
    size_t session_token; /* index into secrets, or SIZE_MAX */
};

struct vault_entry {
    char *pattern; /* as written */
    struct hostmatch *match;
    bool block;
};

struct vault {
    char *run_id;   /* "" when the vault has no run.id */
    char *run_user; /* "" when the vault has no run.user */
    bool default_block;
    bool report_only; /* host_policy.enforce false (SPEC §12) */
    struct vault_secret *secrets;
    size_t nsecrets;
    struct vault_rule *rules;
    size_t nrules;
    struct vault_entry *entries; /* host_policy.hosts, in file order */
    size_t nentries;
};

/*
 * Validates len bytes of JSON. Reads env and file secrets; removes env secrets from the
 * environment (call from the thread that owns the environment). Returns a new vault (free with
 * vault_free) or NULL with one line in err.
 */
struct vault *vault_parse(const char *json, size_t len, char *err, size_t errlen);

/* Reads the file at path (at most VG_VAULT_MAX_BYTES) and parses it. */
struct vault *vault_load(const char *path, char *err, size_t errlen);

/*
 * The same, but env and file secret sources are checked (names, paths) and not read: each
 * gets the stand-in value "(unread)", and the environment is left alone. For what needs the
 * vault's names and routing only (`vaultgate hosts`); never serve with such a vault.
 */
struct vault *vault_load_unread(const char *path, char *err, size_t errlen);

/* Wipes the secrets, frees everything and NULLs *vp. NULL-safe. */
void vault_free(struct vault **vp);

/*
 * Writes s into dst as a double-quoted, printable string, shortened past 64 characters, with
 * credential-shaped parts masked by the redactor: the one way a vault string is echoed.
 */
void vault_quote(char *dst, size_t dstsz, const char *s);

#endif
