/*
 * vault_rule.c - the `rules` array of the vault (SPEC §3): host pattern, secret, scheme and the
 * fields each scheme needs, and the optional scope (`methods`, `paths`).
 *
 * Guarantees: as vault.c - every error starts with the JSON path of the value at fault and
 * echoes vault strings only through the redactor; a rule that parses has exactly the fields its
 * scheme needs, each well-formed, and a scope of distinct, canonical entries within the limits
 * of common/caps.h.
 */
#include "policy/vault_int.h"
#include "policy/cred.h"
#include "policy/scope.h"
#include "common/caps.h"
#include "common/pct.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const struct vfield rule_fields[] = {
    {"host_pattern", cJSON_String, true},   {"secret", cJSON_String, true},
    {"scheme", cJSON_String, true},         {"name", cJSON_String, false},
    {"username", cJSON_String, false},      {"methods", cJSON_Array, false},
    {"paths", cJSON_Array, false},          {"access_key_id", cJSON_String, false},
    {"region", cJSON_String, false},        {"service", cJSON_String, false},
    {"session_token", cJSON_String, false},
};
enum {
    RULE_PATTERN,
    RULE_SECRET,
    RULE_SCHEME,
    RULE_NAME,
    RULE_USERNAME,
    RULE_METHODS,
    RULE_PATHS,
    RULE_AKID,
    RULE_REGION,
    RULE_SERVICE,
    RULE_TOKEN,
    RULE_N
};

/* A kind that signs with the secret itself needs one with a value, not an oauth2 source. */
static int kind_secret_ok(struct vctx *c, const struct cred_kind *k, const struct vault_rule *r)
{
    if (!k->static_secret || c->v->secrets[r->secret].oauth == NULL)
        return 0;
    vault_path_key(c, "secret");
    return vault_err(c, "%s needs a secret with a value (value, env or file), not an oauth2 source",
                     k->name);
}

/* The fields of the rule's kind (policy/cred.h), in the order of rule_fields: each present
 * exactly when the kind takes it (required ones always), well-formed, stored where the kind
 * says. Before the kind's first field: a kind that needs a secret with a value refuses an
 * oauth2 source. 0 or -1. */
static int parse_kind_fields(struct vctx *c, const cJSON **f, const struct cred_kind *k,
                             struct vault_rule *r)
{
    bool secret_checked = false;
    const char *why;
    size_t old;

    for (size_t i = 0; i < cred_kind_count(); i++) {
        const struct cred_kind *any = cred_kind_of((enum policy_scheme)i);

        for (size_t j = 0; j < any->nfields; j++) {
            if (any->fields[j].type == CRED_FIELD_SECRET)
                *(size_t *)((char *)r + any->fields[j].offset) = SIZE_MAX;
        }
    }
    for (int i = RULE_SCHEME + 1; i < RULE_N; i++) {
        const struct cred_field *cf = cred_kind_field(k, rule_fields[i].key);

        if (i == RULE_METHODS || i == RULE_PATHS)
            continue; /* the scope: any kind */
        if (cf != NULL && !secret_checked) {
            secret_checked = true;
            if (kind_secret_ok(c, k, r) != 0)
                return -1;
        }
        old = vault_path_key(c, rule_fields[i].key);
        if (f[i] == NULL && cf != NULL && cf->required)
            return vault_err(c, "required for scheme \"%s\"", k->name);
        if (f[i] != NULL && cf == NULL)
            return vault_err(c, "not allowed for scheme \"%s\"", k->name);
        if (f[i] == NULL) {
            vault_path_pop(c, old);
            continue;
        }
        if (cf->type == CRED_FIELD_SECRET) {
            if (vault_ref_static_secret(c, f[i]->valuestring, (size_t *)((char *)r + cf->offset)) !=
                0)
                return -1;
        } else if (cf->check != NULL && (why = cf->check(f[i]->valuestring)) != NULL) {
            return vault_err(c, "%s", why);
        } else if ((*(char **)((char *)r + cf->offset) = strdup(f[i]->valuestring)) == NULL) {
            return vault_err(c, "out of memory");
        }
        vault_path_pop(c, old);
    }
    return secret_checked ? 0 : kind_secret_ok(c, k, r);
}

/* ---- scope ---- */

/*
 * The strings of a scope array (at the current path): 1..max strings, each checked by ok(),
 * distinct after dec() (or as written). Returns the copies in *out (n in *nout). 0 or -1.
 */
static int scope_strings(struct vctx *c, const cJSON *arr, size_t max, const char *what,
                         char ***out, size_t *nout)
{
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0, old;
    const cJSON *it;

    if (n < 1 || n > max)
        return vault_err(c, "expected 1-%zu %s", max, what);
    if ((*out = calloc(n, sizeof(**out))) == NULL)
        return vault_err(c, "out of memory");
    cJSON_ArrayForEach(it, arr)
    {
        old = vault_path_index(c, i);
        if (!cJSON_IsString(it))
            return vault_err(c, "expected a string, got %s", vault_type_name(it));
        if (((*out)[i] = strdup(it->valuestring)) == NULL)
            return vault_err(c, "out of memory");
        *nout = ++i;
        vault_path_pop(c, old);
    }
    return 0;
}

static int parse_methods(struct vctx *c, const cJSON *arr, struct vault_rule *r)
{
    const char *why = NULL;
    size_t old;

    if (scope_strings(c, arr, VG_SCOPE_MAX_METHODS, "methods", &r->methods, &r->nmethods) != 0)
        return -1;
    for (size_t i = 0; i < r->nmethods; i++) {
        old = vault_path_index(c, i);
        if (!scope_method_ok(r->methods[i], &why))
            return vault_err(c, "method %s", why);
        for (size_t j = 0; j < i; j++) {
            if (strcmp(r->methods[j], r->methods[i]) == 0)
                return vault_err(c, "duplicate method");
        }
        vault_path_pop(c, old);
    }
    return 0;
}

/* A prefix a scope may list: "/..." of visible ASCII, no query or fragment, canonical, no %00. */
static int path_prefix_ok(const char *s, const char **why)
{
    size_t n = strlen(s);

    *why = NULL;
    if (n < 1 || n > SCOPE_PATH_MAX || s[0] != '/') {
        *why = "expected a path of 1-1024 characters starting with '/'";
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x21 || s[i] > 0x7e || s[i] == '?' || s[i] == '#') {
            *why = "expected visible ASCII without '?' or '#'";
            return 0;
        }
        if (s[i] == '%' && i + 2 < n && s[i + 1] == '0' && s[i + 2] == '0') {
            *why = "encoded NUL in the path";
            return 0;
        }
    }
    return scope_path_canonical(s, n, why);
}

static int parse_paths(struct vctx *c, const cJSON *arr, struct vault_rule *r)
{
    const char *why = NULL;
    size_t old, n;

    if (scope_strings(c, arr, VG_SCOPE_MAX_PATHS, "paths", &r->paths, &r->npaths) != 0)
        return -1;
    r->paths_dec = calloc(r->npaths, sizeof(*r->paths_dec));
    r->paths_len = calloc(r->npaths, sizeof(*r->paths_len));
    if (r->paths_dec == NULL || r->paths_len == NULL)
        return vault_err(c, "out of memory");
    for (size_t i = 0; i < r->npaths; i++) {
        old = vault_path_index(c, i);
        if (!path_prefix_ok(r->paths[i], &why))
            return vault_err(c, "%s", why);
        n = strlen(r->paths[i]);
        if ((r->paths_dec[i] = malloc(n + 1)) == NULL)
            return vault_err(c, "out of memory");
        r->paths_len[i] = pct_decode(r->paths_dec[i], r->paths[i], n, 0);
        r->paths_dec[i][r->paths_len[i]] = '\0';
        for (size_t j = 0; j < i; j++) {
            if (r->paths_len[j] == r->paths_len[i] &&
                memcmp(r->paths_dec[j], r->paths_dec[i], r->paths_len[i]) == 0)
                return vault_err(c, "duplicate path (after percent-decoding)");
        }
        vault_path_pop(c, old);
    }
    return 0;
}

/* `methods` and `paths` (optional, any scheme). */
static int parse_scope(struct vctx *c, const cJSON **f, struct vault_rule *r)
{
    size_t old;

    if (f[RULE_METHODS] != NULL) {
        old = vault_path_key(c, "methods");
        if (parse_methods(c, f[RULE_METHODS], r) != 0)
            return -1;
        vault_path_pop(c, old);
    }
    if (f[RULE_PATHS] != NULL) {
        old = vault_path_key(c, "paths");
        if (parse_paths(c, f[RULE_PATHS], r) != 0)
            return -1;
        vault_path_pop(c, old);
    }
    return 0;
}

/* ---- one rule ---- */

static int parse_rule(struct vctx *c, const cJSON *obj, struct vault_rule *r)
{
    const struct cred_kind *k;
    const cJSON *f[RULE_N];
    size_t old;

    if (vault_walk_object(c, obj, rule_fields, RULE_N, f) != 0)
        return -1;
    old = vault_path_key(c, "host_pattern");
    if (vault_compile_pattern(c, f[RULE_PATTERN]->valuestring, true, &r->match) != 0)
        return -1;
    vault_path_pop(c, old);
    if ((r->pattern = strdup(f[RULE_PATTERN]->valuestring)) == NULL)
        return vault_err(c, "out of memory");
    old = vault_path_key(c, "secret");
    if (vault_find_secret(c->v, f[RULE_SECRET]->valuestring, &r->secret) != 0) {
        char q[VAULT_QUOTE_BUF];

        vault_quote(q, sizeof(q), f[RULE_SECRET]->valuestring);
        return vault_err(c, "unknown secret %s", q);
    }
    c->v->secrets[r->secret].used = true;
    vault_path_pop(c, old);
    old = vault_path_key(c, "scheme");
    if ((k = cred_kind_find(f[RULE_SCHEME]->valuestring, &r->scheme)) == NULL) {
        char names[128];

        cred_kind_list(names, sizeof(names));
        return vault_err(c, "expected one of %s", names);
    }
    vault_path_pop(c, old);
    if (parse_kind_fields(c, f, k, r) != 0)
        return -1;
    return parse_scope(c, f, r);
}

int vault_parse_rules(struct vctx *c, const cJSON *rules)
{
    size_t n = (size_t)cJSON_GetArraySize(rules), i = 0, old;
    const cJSON *it;

    if (n > VG_VAULT_MAX_RULES)
        return vault_err(c, "more than %d rules", VG_VAULT_MAX_RULES);
    c->v->rules = calloc(n > 0 ? n : 1, sizeof(*c->v->rules));
    if (c->v->rules == NULL)
        return vault_err(c, "out of memory");
    cJSON_ArrayForEach(it, rules)
    {
        old = vault_path_index(c, i);
        c->v->nrules = i + 1;
        if (parse_rule(c, it, &c->v->rules[i]) != 0)
            return -1;
        vault_path_pop(c, old);
        i++;
    }
    return 0;
}

static void free_strings(char ***v, size_t n)
{
    for (size_t i = 0; *v != NULL && i < n; i++)
        free((*v)[i]);
    free(*v);
    *v = NULL;
}

void vault_rule_free(struct vault_rule *r)
{
    free(r->pattern);
    hostmatch_free(&r->match);
    free(r->name);
    free(r->username);
    free_strings(&r->methods, r->nmethods);
    free_strings(&r->paths, r->npaths);
    free_strings(&r->paths_dec, r->npaths);
    free(r->paths_len);
    free(r->access_key_id);
    free(r->region);
    free(r->service);
}
