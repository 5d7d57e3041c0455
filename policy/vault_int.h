/*
 * vault_int.h - what the files of the vault parser share: vault.c (the walk, paths and errors,
 * secrets, host entries, entry points), vault_rule.c (rules: scheme fields and scopes). Private to
 * those files.
 */
#ifndef VG_VAULT_INT_H
#define VG_VAULT_INT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "policy/vault.h"

#define VAULT_PATH_MAX  384
#define VAULT_QUOTE_MAX 64
#define VAULT_QUOTE_BUF (VAULT_QUOTE_MAX * 4 + 16)
#define VAULT_NAME_MAX  256 /* oauth2 client ids and secret names (cred.h: CRED_NAME_MAX) */

/* The parse in progress: the JSON path of the value being checked, the caller's error buffer. */
struct vctx {
    char path[VAULT_PATH_MAX];
    size_t plen;
    bool unread; /* env and file sources are checked but not read (vault_load_unread) */
    char *err;
    size_t errlen;
    struct vault *v;
};

/* One row of a fixed-field object's schema. */
/* A field's type for vfield: true or false (cJSON has a type for each). */
#define VAULT_BOOL (cJSON_True | cJSON_False)

struct vfield {
    const char *key;
    int type; /* cJSON_String, cJSON_Number, cJSON_Object, cJSON_Array or VAULT_BOOL */
    bool required;
};

/* Appends `.key` (or `["key"]`) to the path; returns the old length for vault_path_pop. */
size_t vault_path_key(struct vctx *c, const char *key);
size_t vault_path_index(struct vctx *c, size_t i);
void vault_path_pop(struct vctx *c, size_t old);

/* Writes "<path>: <message>" to the caller's buffer. Always returns -1. */
int vault_err(struct vctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* "a string", "an array", ... for messages. */
const char *vault_type_name(const cJSON *item);

/*
 * Checks obj against a fixed schema: an object, no unknown or duplicate keys, each value of
 * its type, required keys present. slots[i] receives the item for fields[i] or NULL.
 */
int vault_walk_object(struct vctx *c, const cJSON *obj, const struct vfield *fields, size_t n,
                      const cJSON **slots);

/* Index of the secret named name: 0 with *idx, or -1. */
int vault_find_secret(const struct vault *v, const char *name, size_t *idx);

/* The secret named name, at the current path, for a field that needs a value read from the vault
 * (sigv4's session_token, oauth2's client_secret and refresh_token): it must exist and must not
 * be an oauth2 source. Marks it used. 0 with *idx, or -1. */
int vault_ref_static_secret(struct vctx *c, const char *name, size_t *idx);

/* Host pattern compiled at the current path (rule: the too-broad check too). 0 or -1. */
int vault_compile_pattern(struct vctx *c, const char *pattern, bool rule, struct hostmatch **out);

/* vault_rule.c: the `rules` array (secrets are parsed already). 0 or -1. */
int vault_parse_rules(struct vctx *c, const cJSON *rules);
void vault_rule_free(struct vault_rule *r);

/* vault_oauth.c: the `oauth2` object of secrets.NAME (at the current path). 0 or -1. */
int vault_parse_oauth(struct vctx *c, const cJSON *obj, struct vault_secret *s);

/* After every secret is parsed: the oauth2 sources' references to other secrets. 0 or -1. */
int vault_resolve_oauth(struct vctx *c);
void vault_oauth_free(struct vault_oauth **op);

#endif
