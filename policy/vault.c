/*
 * vault.c - the vault file: JSON -> validated struct vault (SPEC §3).
 *
 * Guarantees: strict schema (unknown and duplicate fields are errors); every error is one line
 * that starts with the JSON path of the offending value and never contains a secret byte, and
 * every vault string it echoes (in the path or the message) has passed the redactor
 * (common/redact.h), so a credential pasted into the wrong field is masked too; all
 * limits of SPEC §3 and common/caps.h hold for a returned vault; secrets are copied into
 * wiped-on-free memory and every temporary copy (input buffer, cJSON strings) is wiped; env
 * secrets are removed from the environment once read.
 */
#include "policy/vault.h"
#include "policy/vault_int.h"
#include "policy/httphead.h"
#include "policy/secretsrc.h"
#include "common/caps.h"
#include "common/redact.h"
#include "common/secmem.h"
#include "common/suggest.h"

#include <cjson/cJSON.h>
#include <openssl/crypto.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define VAULT_ENVNAME_MAX  255
#define VAULT_FILEPATH_MAX 4096

static const struct vfield top_fields[] = {
    {"version", cJSON_Number, true},      {"run", cJSON_Object, false},
    {"secrets", cJSON_Object, false},     {"rules", cJSON_Array, false},
    {"host_policy", cJSON_Object, false},
};
enum { TOP_VERSION, TOP_RUN, TOP_SECRETS, TOP_RULES, TOP_HOST_POLICY, TOP_N };

static const struct vfield run_fields[] = {
    {"id", cJSON_String, true},
    {"user", cJSON_String, false},
};
enum { RUN_ID, RUN_USER, RUN_N };

static const struct vfield secret_fields[] = {
    {"value", cJSON_String, false},
    {"env", cJSON_String, false},
    {"file", cJSON_String, false},
    {"oauth2", cJSON_Object, false},
};
enum { SEC_VALUE, SEC_ENV, SEC_FILE, SEC_OAUTH, SEC_N };

static const struct vfield hostpol_fields[] = {
    {"default", cJSON_String, false},
    {"hosts", cJSON_Object, false},
    {"enforce", VAULT_BOOL, false},
};
enum { HP_DEFAULT, HP_HOSTS, HP_ENFORCE, HP_N };

/* ---- paths and errors ---- */

void vault_quote(char *dst, size_t dstsz, const char *s)
{
    char shown[VAULT_QUOTE_MAX + REDACT_TOKEN_RUN + 1];
    size_t o = 0, i;

    if (dstsz < 8)
        return;
    redact_copy(shown, sizeof(shown), s);
    dst[o++] = '"';
    for (i = 0; shown[i] != '\0' && o + 6 < dstsz; i++) {
        unsigned char c = (unsigned char)shown[i];

        if (i >= VAULT_QUOTE_MAX) {
            o += (size_t)snprintf(dst + o, dstsz - o, "...");
            break;
        }
        if (c == '"' || c == '\\')
            o += (size_t)snprintf(dst + o, dstsz - o, "\\%c", c);
        else if (c < 0x20 || c > 0x7e)
            o += (size_t)snprintf(dst + o, dstsz - o, "\\x%02X", c);
        else
            dst[o++] = (char)c;
    }
    dst[o++] = '"';
    dst[o] = '\0';
}

static int is_ident(const char *s)
{
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return 0;
    for (s++; *s != '\0'; s++) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_' ||
              (*s >= '0' && *s <= '9')))
            return 0;
    }
    return 1;
}

/*
 * Appends `.key`, or `["key"]` when key is not an identifier, when always_quote is set (host
 * patterns), or when the redactor masks part of it (a credential pasted as a name); returns the
 * old length for path_pop.
 */
static size_t path_key_q(struct vctx *c, const char *key, bool always_quote)
{
    size_t old = c->plen;
    char q[VAULT_QUOTE_BUF], shown[VAULT_QUOTE_MAX + 1];
    int n;

    if (!always_quote && is_ident(key) && strlen(key) <= VAULT_QUOTE_MAX &&
        strcmp(redact_copy(shown, sizeof(shown), key), key) == 0) {
        n = snprintf(c->path + c->plen, sizeof(c->path) - c->plen, "%s%s", c->plen > 0 ? "." : "",
                     key);
    } else {
        vault_quote(q, sizeof(q), key);
        n = snprintf(c->path + c->plen, sizeof(c->path) - c->plen, "[%s]", q);
    }
    if (n > 0)
        c->plen = c->plen + (size_t)n < sizeof(c->path) ? c->plen + (size_t)n : sizeof(c->path) - 1;
    return old;
}

size_t vault_path_key(struct vctx *c, const char *key)
{
    return path_key_q(c, key, false);
}

size_t vault_path_index(struct vctx *c, size_t i)
{
    size_t old = c->plen;
    int n = snprintf(c->path + c->plen, sizeof(c->path) - c->plen, "[%zu]", i);

    if (n > 0)
        c->plen = c->plen + (size_t)n < sizeof(c->path) ? c->plen + (size_t)n : sizeof(c->path) - 1;
    return old;
}

void vault_path_pop(struct vctx *c, size_t old)
{
    c->plen = old;
    c->path[old] = '\0';
}

/* Writes "<path>: <message>" to the caller's buffer. Always returns -1. */
int vault_err(struct vctx *c, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->err != NULL && c->errlen > 0)
        snprintf(c->err, c->errlen, "%s: %s", c->plen > 0 ? c->path : "(root)", msg);
    return -1;
}

const char *vault_type_name(const cJSON *item)
{
    if (cJSON_IsString(item))
        return "a string";
    if (cJSON_IsNumber(item))
        return "a number";
    if (cJSON_IsObject(item))
        return "an object";
    if (cJSON_IsArray(item))
        return "an array";
    if (cJSON_IsBool(item))
        return "a boolean";
    return "null";
}

static const char *want_name(int type)
{
    switch (type) {
    case cJSON_String:
        return "a string";
    case cJSON_Number:
        return "a number";
    case cJSON_Object:
        return "an object";
    case VAULT_BOOL:
        return "a boolean";
    default:
        return "an array";
    }
}

static int type_is(const cJSON *item, int type)
{
    if (type == VAULT_BOOL)
        return cJSON_IsBool(item);
    return (item->type & 0xFF) == type;
}

/*
 * Checks obj against a fixed schema: an object, no unknown or duplicate keys, each value of
 * its type, required keys present. slots[i] receives the item for fields[i] or NULL.
 */
/* "unknown field", and the nearest known field when the key looks like a typo of one. */
static int unknown_field(struct vctx *c, const char *key, const struct vfield *fields, size_t n)
{
    const char *keys[32], *near;
    size_t k = 0;

    for (; k < n && k < sizeof(keys) / sizeof(keys[0]); k++)
        keys[k] = fields[k].key;
    near = suggest_nearest(key, keys, k);
    if (near != NULL)
        return vault_err(c, "unknown field; did you mean \"%s\"?", near);
    return vault_err(c, "unknown field");
}

int vault_walk_object(struct vctx *c, const cJSON *obj, const struct vfield *fields, size_t n,
                      const cJSON **slots)
{
    const cJSON *it;
    size_t i, old;

    if (!cJSON_IsObject(obj))
        return vault_err(c, "expected an object, got %s", vault_type_name(obj));
    for (i = 0; i < n; i++)
        slots[i] = NULL;
    cJSON_ArrayForEach(it, obj)
    {
        for (i = 0; i < n && strcmp(fields[i].key, it->string) != 0; i++)
            ;
        old = vault_path_key(c, it->string);
        if (i == n)
            return unknown_field(c, it->string, fields, n);
        if (slots[i] != NULL)
            return vault_err(c, "duplicate field");
        if (!type_is(it, fields[i].type))
            return vault_err(c, "expected %s, got %s", want_name(fields[i].type),
                             vault_type_name(it));
        slots[i] = it;
        vault_path_pop(c, old);
    }
    for (i = 0; i < n; i++) {
        if (fields[i].required && slots[i] == NULL) {
            vault_path_key(c, fields[i].key);
            return vault_err(c, "missing required field");
        }
    }
    return 0;
}

/* ---- scalar checks ---- */

static int run_id_ok(const char *s)
{
    size_t n = strlen(s);

    if (n < 1 || n > VG_RUN_ID_MAX)
        return 0;
    for (; *s != '\0'; s++) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') ||
              *s == '.' || *s == '_' || *s == ':' || *s == '-'))
            return 0;
    }
    return 1;
}

static int secret_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n < 1 || n > VG_SECRET_NAME_MAX || !(*s >= 'A' && *s <= 'Z'))
        return 0;
    for (s++; *s != '\0'; s++) {
        if (!((*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    }
    return 1;
}

/* Checks a secret's bytes; the error names the offset, never the bytes. */
static int check_secret_bytes(struct vctx *c, const char *what, const char *s, size_t len)
{
    if (len < 1 || len > VG_SECRET_MAX_BYTES)
        return vault_err(c, "%ssecret must be 1-%d bytes, got %zu", what, VG_SECRET_MAX_BYTES, len);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];

        if (ch != ' ' && (ch < 0x21 || ch > 0x7e))
            return vault_err(c,
                             "%ssecret has a forbidden byte at offset %zu (only visible ASCII and "
                             "space; CR, LF, NUL and other controls are refused)",
                             what, i);
    }
    return 0;
}

/* ---- secret sources ---- */

/* The stand-in value of a source that vault_load_unread() does not read. */
static int unread_value(struct vctx *c, char **val, size_t *len)
{
    static const char placeholder[] = "(unread)";

    if ((*val = secmem_dup(placeholder, sizeof(placeholder) - 1)) == NULL)
        return vault_err(c, "out of memory");
    *len = sizeof(placeholder) - 1;
    return 0;
}

static int secret_from_env(struct vctx *c, const char *var, char **val, size_t *len)
{
    char shown[VAULT_ENVNAME_MAX + 1];
    size_t n = strlen(var);

    if (n < 1 || n > VAULT_ENVNAME_MAX || !is_ident(var))
        return vault_err(c, "expected an environment variable name ([A-Za-z_][A-Za-z0-9_]*)");
    if (c->unread)
        return unread_value(c, val, len);
    if (secretsrc_env_take(var, val, len) != 0)
        return vault_err(c, "environment variable %s is not set",
                         redact_copy(shown, sizeof(shown), var));
    return 0;
}

static int secret_from_file(struct vctx *c, const char *path, char **val, size_t *len)
{
    char why[128], q[VAULT_QUOTE_BUF];
    size_t n = strlen(path), got = 0;
    char *buf = NULL, *copy;

    vault_quote(q, sizeof(q), path);
    if (n < 2 || n > VAULT_FILEPATH_MAX || path[0] != '/')
        return vault_err(c, "expected an absolute path, got %s", q);
    for (size_t i = 0; i < n; i++) {
        if ((unsigned char)path[i] < 0x20 || path[i] == 0x7f)
            return vault_err(c, "path contains a control character");
    }
    if (c->unread)
        return unread_value(c, val, len);
    if (secretsrc_read_file(path, VG_SECRET_FILE_MAX_BYTES, &buf, &got, why, sizeof(why)) != 0)
        return vault_err(c, "cannot read %s: %s", q, why);
    if (got > 0 && buf[got - 1] == '\n')
        got--;
    copy = secmem_dup(buf, got);
    secmem_free(&buf, VG_SECRET_FILE_MAX_BYTES + 2);
    if (copy == NULL)
        return vault_err(c, "out of memory");
    *val = copy;
    *len = got;
    return 0;
}

/* ---- sections ---- */

static int parse_run(struct vctx *c, const cJSON *run)
{
    const cJSON *f[RUN_N];
    size_t old;

    if (vault_walk_object(c, run, run_fields, RUN_N, f) != 0)
        return -1;
    for (int i = 0; i < RUN_N; i++) {
        if (f[i] == NULL)
            continue;
        old = vault_path_key(c, run_fields[i].key);
        if (!run_id_ok(f[i]->valuestring))
            return vault_err(c, "expected 1-128 characters of [A-Za-z0-9._:-]");
        vault_path_pop(c, old);
    }
    free(c->v->run_id);
    free(c->v->run_user);
    c->v->run_id = strdup(f[RUN_ID]->valuestring);
    c->v->run_user = strdup(f[RUN_USER] != NULL ? f[RUN_USER]->valuestring : "");
    if (c->v->run_id == NULL || c->v->run_user == NULL)
        return vault_err(c, "out of memory");
    return 0;
}

/* Fills s from one `secrets.NAME` object. */
static int parse_secret_source(struct vctx *c, const cJSON *obj, struct vault_secret *s)
{
    const cJSON *f[SEC_N];
    int which = -1, nsrc = 0, rc = -1;
    char *val = NULL;
    size_t len = 0, old;

    if (vault_walk_object(c, obj, secret_fields, SEC_N, f) != 0)
        return -1;
    for (int i = 0; i < SEC_N; i++) {
        if (f[i] != NULL && nsrc++ == 0)
            which = i;
    }
    if (nsrc != 1)
        return vault_err(c, "exactly one of value, env, file, oauth2 is required (got %d)", nsrc);
    old = vault_path_key(c, secret_fields[which].key);
    if (which == SEC_OAUTH) {
        if (vault_parse_oauth(c, f[which], s) != 0)
            return -1;
        vault_path_pop(c, old);
        return 0;
    }
    if (which == SEC_VALUE) {
        len = strlen(f[which]->valuestring);
        if ((val = secmem_dup(f[which]->valuestring, len)) == NULL)
            return vault_err(c, "out of memory");
    } else if (which == SEC_ENV) {
        if (secret_from_env(c, f[which]->valuestring, &val, &len) != 0)
            return -1;
    } else if (secret_from_file(c, f[which]->valuestring, &val, &len) != 0) {
        return -1;
    }
    if (check_secret_bytes(c, which == SEC_VALUE ? "" : "the ", val, len) != 0)
        goto out;
    s->value = val;
    s->len = len;
    val = NULL;
    vault_path_pop(c, old);
    rc = 0;
out:
    secmem_free(&val, len + 1);
    return rc;
}

static int parse_secrets(struct vctx *c, const cJSON *secrets)
{
    const cJSON *it;
    size_t n = (size_t)cJSON_GetArraySize(secrets), i = 0, old;

    if (n > VG_VAULT_MAX_SECRETS)
        return vault_err(c, "more than %d secrets", VG_VAULT_MAX_SECRETS);
    c->v->secrets = calloc(n > 0 ? n : 1, sizeof(*c->v->secrets));
    if (c->v->secrets == NULL)
        return vault_err(c, "out of memory");
    cJSON_ArrayForEach(it, secrets)
    {
        struct vault_secret *s = &c->v->secrets[i];

        old = vault_path_key(c, it->string);
        if (!secret_name_ok(it->string))
            return vault_err(c, "secret name must match [A-Z][A-Z0-9_]{0,63}");
        for (size_t j = 0; j < i; j++) {
            if (strcmp(c->v->secrets[j].name, it->string) == 0)
                return vault_err(c, "duplicate secret name");
        }
        s->name = strdup(it->string);
        if (s->name == NULL)
            return vault_err(c, "out of memory");
        c->v->nsecrets = ++i;
        if (parse_secret_source(c, it, s) != 0)
            return -1;
        vault_path_pop(c, old);
    }
    return 0;
}

int vault_find_secret(const struct vault *v, const char *name, size_t *idx)
{
    for (size_t i = 0; i < v->nsecrets; i++) {
        if (strcmp(v->secrets[i].name, name) == 0) {
            *idx = i;
            return 0;
        }
    }
    return -1;
}

int vault_ref_static_secret(struct vctx *c, const char *name, size_t *idx)
{
    char q[VAULT_QUOTE_BUF];

    if (vault_find_secret(c->v, name, idx) != 0) {
        vault_quote(q, sizeof(q), name);
        return vault_err(c, "unknown secret %s", q);
    }
    if (c->v->secrets[*idx].oauth != NULL)
        return vault_err(c, "needs a secret with a value (value, env or file), not an oauth2 "
                            "source");
    c->v->secrets[*idx].used = true;
    return 0;
}

int vault_compile_pattern(struct vctx *c, const char *pattern, bool rule, struct hostmatch **out)
{
    char why[256], q[VAULT_QUOTE_BUF], shown[VAULT_QUOTE_MAX + REDACT_TOKEN_RUN + 1];
    struct hostmatch *m = hostmatch_compile(pattern, why, sizeof(why));
    bool masked = strcmp(redact_copy(shown, sizeof(shown), pattern), pattern) != 0;

    vault_quote(q, sizeof(q), pattern);
    if (m == NULL)
        return vault_err(c, "%s: %s", q, redact_text(why));
    if (rule && hostmatch_too_broad(m, why, sizeof(why))) {
        hostmatch_free(&m);
        /* the reason restates the pattern lower-cased, where a masked part (AKIA...) may no
         * longer look like a credential: leave it out then */
        if (masked)
            return vault_err(c, "%s is too broad for a rule", q);
        return vault_err(c, "%s is too broad for a rule: %s", q, redact_text(why));
    }
    *out = m;
    return 0;
}

/* 0 if no two entries name the same host after normalisation. */
static int check_duplicate_entries(struct vctx *c, const cJSON *hosts)
{
    const struct vault *v = c->v;

    for (size_t i = 1; i < v->nentries; i++) {
        enum hostmatch_kind ki = hostmatch_kind(v->entries[i].match);
        const char *ti = hostmatch_text(v->entries[i].match);

        for (size_t j = 0; j < i; j++) {
            char q[VAULT_QUOTE_BUF];

            if (hostmatch_kind(v->entries[j].match) != ki ||
                strcmp(hostmatch_text(v->entries[j].match), ti) != 0)
                continue;
            vault_quote(q, sizeof(q), v->entries[j].pattern);
            path_key_q(c, v->entries[i].pattern, true);
            return vault_err(c, "same host pattern as host_policy.hosts[%s]", q);
        }
    }
    (void)hosts;
    return 0;
}

static int parse_hosts(struct vctx *c, const cJSON *hosts)
{
    size_t n = (size_t)cJSON_GetArraySize(hosts), i = 0, old;
    const cJSON *it;

    if (n > VG_VAULT_MAX_HOST_ENTRIES)
        return vault_err(c, "more than %d entries", VG_VAULT_MAX_HOST_ENTRIES);
    c->v->entries = calloc(n > 0 ? n : 1, sizeof(*c->v->entries));
    if (c->v->entries == NULL)
        return vault_err(c, "out of memory");
    cJSON_ArrayForEach(it, hosts)
    {
        struct vault_entry *e = &c->v->entries[i];

        old = path_key_q(c, it->string, true);
        if (!cJSON_IsString(it))
            return vault_err(c, "expected a string, got %s", vault_type_name(it));
        if (strcmp(it->valuestring, "allow") != 0 && strcmp(it->valuestring, "block") != 0)
            return vault_err(c, "expected one of allow, block");
        c->v->nentries = ++i;
        e->block = it->valuestring[0] == 'b';
        if (vault_compile_pattern(c, it->string, false, &e->match) != 0)
            return -1;
        if ((e->pattern = strdup(it->string)) == NULL)
            return vault_err(c, "out of memory");
        vault_path_pop(c, old);
    }
    return check_duplicate_entries(c, hosts);
}

static int parse_host_policy(struct vctx *c, const cJSON *hp)
{
    const cJSON *f[HP_N];
    size_t old;

    if (vault_walk_object(c, hp, hostpol_fields, HP_N, f) != 0)
        return -1;
    if (f[HP_DEFAULT] != NULL) {
        old = vault_path_key(c, "default");
        if (strcmp(f[HP_DEFAULT]->valuestring, "allow") != 0 &&
            strcmp(f[HP_DEFAULT]->valuestring, "block") != 0)
            return vault_err(c, "expected one of allow, block");
        c->v->default_block = f[HP_DEFAULT]->valuestring[0] == 'b';
        vault_path_pop(c, old);
    }
    /* report-only (SPEC §12): a policy block is forwarded without a credential and counted */
    c->v->report_only = f[HP_ENFORCE] != NULL && cJSON_IsFalse(f[HP_ENFORCE]);
    if (f[HP_HOSTS] != NULL) {
        old = vault_path_key(c, "hosts");
        if (parse_hosts(c, f[HP_HOSTS]) != 0)
            return -1;
        vault_path_pop(c, old);
    }
    return 0;
}

static int parse_top(struct vctx *c, const cJSON *root)
{
    const cJSON *f[TOP_N];
    size_t old;

    if (vault_walk_object(c, root, top_fields, TOP_N, f) != 0)
        return -1;
    old = vault_path_key(c, "version");
    if (f[TOP_VERSION]->valuedouble != 1.0)
        return vault_err(c, "expected 1");
    vault_path_pop(c, old);
    static const int order[] = {TOP_RUN, TOP_SECRETS, TOP_RULES, TOP_HOST_POLICY};
    for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
        int k = order[i], rc = 0;

        if (f[k] == NULL)
            continue;
        old = vault_path_key(c, top_fields[k].key);
        if (k == TOP_RUN)
            rc = parse_run(c, f[k]);
        else if (k == TOP_SECRETS)
            rc = parse_secrets(c, f[k]) != 0 ? -1 : vault_resolve_oauth(c);
        else if (k == TOP_RULES)
            rc = vault_parse_rules(c, f[k]);
        else
            rc = parse_host_policy(c, f[k]);
        if (rc != 0)
            return -1;
        vault_path_pop(c, old);
    }
    return 0;
}

/* ---- entry points ---- */

/*
 * cJSON decodes \u0000 into a C string and so would silently cut a secret short. Turn every
 * NUL (raw, or escaped as \u0000 inside a string) into 0x01 so that validation refuses it
 * with the path of the value that carried it.
 */
static void neutralise_nul(char *s, size_t len)
{
    bool in_str = false;

    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\0')
            s[i] = 0x01;
    }
    for (size_t i = 0; i < len; i++) {
        if (!in_str) {
            in_str = s[i] == '"';
        } else if (s[i] == '"') {
            in_str = false;
        } else if (s[i] == '\\' && i + 1 < len) {
            if (s[i + 1] == 'u' && i + 5 < len && memcmp(s + i + 2, "0000", 4) == 0)
                s[i + 5] = '1';
            i++;
        }
    }
}

static void syntax_error(const char *buf, size_t off, const char *what, char *err, size_t errlen)
{
    size_t line = 1, col = 1;

    for (size_t i = 0; i < off; i++) {
        if (buf[i] == '\n') {
            line++;
            col = 1;
        } else {
            col++;
        }
    }
    if (err != NULL && errlen > 0)
        snprintf(err, errlen, "%s at line %zu, column %zu", what, line, col);
}

/* Parses buf (NUL-terminated copy of len bytes) into a cJSON tree, or NULL with err. */
static cJSON *parse_json(const char *buf, size_t len, char *err, size_t errlen)
{
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len, &end, 0);
    size_t off;

    if (root == NULL) {
        off = end != NULL && end >= buf && end <= buf + len ? (size_t)(end - buf) : 0;
        syntax_error(buf, off, "invalid JSON", err, errlen);
        return NULL;
    }
    off = (size_t)(end - buf);
    while (off < len && strchr(" \t\r\n", buf[off]) != NULL)
        off++;
    if (off < len) {
        syntax_error(buf, off, "unexpected data after the JSON value", err, errlen);
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

/* cJSON does not wipe; secret values sit in its strings. */
static void wipe_tree(cJSON *item)
{
    for (; item != NULL; item = item->next) {
        if (item->valuestring != NULL)
            OPENSSL_cleanse(item->valuestring, strlen(item->valuestring));
        wipe_tree(item->child);
    }
}

static struct vault *parse(const char *json, size_t len, bool unread, char *err, size_t errlen);

struct vault *vault_parse(const char *json, size_t len, char *err, size_t errlen)
{
    return parse(json, len, false, err, errlen);
}

static struct vault *parse(const char *json, size_t len, bool unread, char *err, size_t errlen)
{
    char scratch[8];
    struct vctx c;
    char *buf = NULL;
    cJSON *root = NULL;
    struct vault *v = NULL;

    if (err == NULL || errlen == 0) { /* callers that do not want the reason */
        err = scratch;
        errlen = sizeof(scratch);
    }
    memset(&c, 0, sizeof(c));
    c.unread = unread;
    c.err = err;
    c.errlen = errlen;
    err[0] = '\0';
    if (json == NULL) {
        json = "";
        len = 0;
    }
    if (len > VG_VAULT_MAX_BYTES) {
        snprintf(err, errlen, "vault is larger than %d bytes", VG_VAULT_MAX_BYTES);
        goto out;
    }
    if ((buf = secmem_dup(json, len)) == NULL || (c.v = v = calloc(1, sizeof(*v))) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    neutralise_nul(buf, len);
    if ((root = parse_json(buf, len, err, errlen)) == NULL)
        goto out;
    if ((v->run_id = strdup("")) == NULL || (v->run_user = strdup("")) == NULL) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    if (parse_top(&c, root) != 0)
        goto out;
    wipe_tree(root);
    cJSON_Delete(root);
    secmem_free(&buf, len + 1);
    return v;
out:
    wipe_tree(root);
    cJSON_Delete(root);
    secmem_free(&buf, len + 1);
    vault_free(&v);
    return NULL;
}

static struct vault *load(const char *path, bool unread, char *err, size_t errlen);

struct vault *vault_load(const char *path, char *err, size_t errlen)
{
    return load(path, false, err, errlen);
}

struct vault *vault_load_unread(const char *path, char *err, size_t errlen)
{
    return load(path, true, err, errlen);
}

static struct vault *load(const char *path, bool unread, char *err, size_t errlen)
{
    char why[128], scratch[8];
    char *buf = NULL;
    size_t len = 0;
    struct vault *v;
    int rc;

    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    rc = secretsrc_read_file(path, VG_VAULT_MAX_BYTES, &buf, &len, why, sizeof(why));
    if (rc == -2)
        snprintf(err, errlen, "vault is larger than %d bytes", VG_VAULT_MAX_BYTES);
    else if (rc != 0)
        snprintf(err, errlen, "cannot read vault: %s", why);
    if (rc != 0)
        return NULL;
    v = parse(buf, len, unread, err, errlen);
    secmem_free(&buf, VG_VAULT_MAX_BYTES + 2);
    return v;
}

void vault_free(struct vault **vp)
{
    struct vault *v;

    if (vp == NULL || *vp == NULL)
        return;
    v = *vp;
    for (size_t i = 0; i < v->nsecrets; i++) {
        free(v->secrets[i].name);
        secmem_free(&v->secrets[i].value, v->secrets[i].len + 1);
        vault_oauth_free(&v->secrets[i].oauth);
    }
    for (size_t i = 0; i < v->nrules; i++)
        vault_rule_free(&v->rules[i]);
    for (size_t i = 0; i < v->nentries; i++) {
        free(v->entries[i].pattern);
        hostmatch_free(&v->entries[i].match);
    }
    free(v->secrets);
    free(v->rules);
    free(v->entries);
    free(v->run_id);
    free(v->run_user);
    free(v);
    *vp = NULL;
}
