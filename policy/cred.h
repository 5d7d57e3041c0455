/*
 * cred.h - credential kinds as a table (SPEC §3 `scheme`). A kind is one policy/cred_<kind>.c
 * defining one struct cred_kind: the rule fields it takes, how its secret goes on the wire, the
 * extra forms the masker looks for, how a request head gets it (or how each request is signed),
 * and how `vaultgate check` shows it. policy/cred.c lists the kinds, in the order of enum
 * policy_scheme; the vault parser, the snapshot and injection go through that table only.
 *
 * Internal to policy/ (its files, tests and fuzzers): the proxy sees a rule's kind through
 * policy_rule_info (scheme, per_request) and inject.h.
 */
#ifndef VG_CRED_H
#define VG_CRED_H

#include <stdbool.h>
#include <stddef.h>

#include <time.h>

#include <cjson/cJSON.h>

#include "policy/httphead.h"
#include "policy/policy.h"
#include "policy/policy_int.h"
#include "policy/sigv4.h"
#include "policy/vault.h"

/* Header and query parameter names, usernames: at most this many bytes. */
#define CRED_NAME_MAX 256

/* What a kind's describe() may write, NUL included (sigv4: two words of 64 and a note). */
#define CRED_DESCRIBE_MAX 256

enum cred_field_type {
    CRED_FIELD_STRING, /* a char * member of struct vault_rule, NULL when absent */
    CRED_FIELD_SECRET, /* a size_t member: the index of a secret with a value, SIZE_MAX absent */
};

/* One rule field a kind takes. The key must be one of the rule object's keys (vault_rule.c). */
struct cred_field {
    const char *key;
    enum cred_field_type type;
    bool required;
    size_t offset; /* offsetof(struct vault_rule, member) */
    /* CRED_FIELD_STRING: NULL when value is well-formed, else the whole error message (after
     * the JSON path); no check when NULL. */
    const char *(*check)(const char *value);
};

struct cred_kind {
    const char *name; /* as the vault writes it */
    const struct cred_field *fields;
    size_t nfields;
    /* The rule's secret must hold a value (value, env or file), not be an oauth2 source. */
    bool static_secret;
    /*
     * The wire value for secret (slen bytes; "" and 0 for an oauth2 rule at load): the header
     * value or the encoded query value, in a new buffer of *len bytes plus NUL (cred_concat),
     * which the caller wipes and frees. Temporary copies of the secret are wiped. 0 or -1.
     */
    int (*wire)(const struct vault_rule *r, const char *secret, size_t slen, char **value,
                size_t *len);
    /* Forms beyond the raw secret (which the caller adds first), with cred_add_form; w->value
     * is set. NULL: none. */
    void (*forms)(const struct vault *v, const struct vault_rule *r, struct policy_wire *w);
    /* Puts the wire value w into h (every instance replaced, never duplicated). 0 or -1.
     * NULL for a kind that signs each request instead. */
    int (*apply)(struct http_head *h, const struct policy_rule_info *ri,
                 const struct policy_wire *w);
    /* Signs h for each request (the exchange hashes the body first): the signature's hex goes
     * to sig_hex, for masking. 0 or -1. NULL for a kind with a fixed wire value. */
    int (*sign)(struct http_head *h, const struct vault *v, const struct vault_rule *r,
                const char *payload_hash, time_t now, char sig_hex[SIGV4_HEX_LEN + 1]);
    /* `vaultgate check`: text after the scheme name (" <service> <region>") into buf, and
     * members of the rule's JSON object. NULL: nothing. Never a secret. */
    void (*describe)(const struct vault_rule *r, char *buf, size_t len);
    void (*json)(const struct vault_rule *r, cJSON *o);
};

/* The kinds, each defined in its cred_<kind>.c. */
extern const struct cred_kind cred_bearer;
extern const struct cred_kind cred_basic;
extern const struct cred_kind cred_header;
extern const struct cred_kind cred_query;
extern const struct cred_kind cred_sigv4;

/* How many kinds the table holds (every enum policy_scheme value has one). */
size_t cred_kind_count(void);

/* The kind of scheme s, or NULL when s is no scheme. */
const struct cred_kind *cred_kind_of(enum policy_scheme s);

/* The kind named name, its scheme in *s; NULL (and *s untouched) when none is. */
const struct cred_kind *cred_kind_find(const char *name, enum policy_scheme *s);

/* "bearer, basic, header, query, sigv4": the names in table order, into buf (truncated). */
void cred_kind_list(char *buf, size_t len);

/* The field of k named key, or NULL when k does not take it. */
const struct cred_field *cred_kind_field(const struct cred_kind *k, const char *key);

#endif
