/*
 * policy.h - the run's policy: an immutable, reference-counted snapshot built from one vault
 * file, and the decision for one host (SPEC §3).
 *
 * A snapshot never changes after policy_load() returns; reload builds a new one and swaps a
 * pointer. Secrets live only inside the snapshot, in memory wiped when the last reference goes.
 * Nothing here logs or does I/O beyond reading the vault and secret files at load time.
 */
#ifndef VG_POLICY_H
#define VG_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

struct policy;

enum policy_mode {
    POLICY_MODE_DEFAULT = 0,
    POLICY_MODE_CATCHALL,
};

enum policy_verdict {
    POLICY_BLOCK = 0,
    POLICY_INJECT,
    POLICY_ALLOW,
};

enum policy_scheme {
    POLICY_SCHEME_BEARER = 0,
    POLICY_SCHEME_BASIC,
    POLICY_SCHEME_HEADER,
    POLICY_SCHEME_QUERY,
    POLICY_SCHEME_SIGV4,
    POLICY_SCHEME_COUNT /* not a scheme: how many there are (policy/cred.c has one kind each) */
};

/*
 * Under a report-only vault (host_policy.enforce false, SPEC §12) a decision that would be
 * POLICY_BLOCK is POLICY_ALLOW with `reported` set: forwarded without any credential, counted
 * under the route `reported`. out_of_scope keeps saying why it would have been refused.
 */
struct policy_decision {
    enum policy_verdict verdict;
    int rule;          /* index of the matching rule for POLICY_INJECT, else -1 */
    bool designated;   /* a rule host or a block entry: intercepted in default routing */
    bool out_of_scope; /* block by step 3: rules match the host, none admits the request */
    bool rule_host;    /* some rule's host pattern matches the host: upstream TLS on 443 only */
    bool reported;     /* a block the report-only vault forwards instead (verdict ALLOW) */
};

/* Read-only view of one rule, for logs, metrics and status. Never holds the secret. */
struct policy_rule_info {
    const char *host_pattern; /* as written in the vault */
    const char *secret_name;
    enum policy_scheme scheme;
    const char *name;           /* header or query parameter name, or NULL */
    const char *username;       /* basic only, else NULL */
    const char *const *methods; /* scope: NULL (every method) or nmethods tokens */
    size_t nmethods;
    const char *const *paths; /* scope: NULL (every path) or npaths prefixes as written */
    size_t npaths;
    const char *region;  /* sigv4 only, else NULL */
    const char *service; /* sigv4 only, else NULL */
    int oauth;           /* its secret is oauth2 source number `oauth`, else -1 */
    bool per_request;    /* the scheme signs each request (inject_sigv4), after its body */
};

/*
 * An oauth2 secret source a rule uses (SPEC §3 "OAuth 2.0 access tokens"), for the token
 * manager (proxy/oauth.c) only: it carries the client secret and the refresh token, which go to
 * the token endpoint and nowhere else. Strings live as long as the snapshot.
 */
struct policy_oauth {
    const char *secret_name;
    const char *token_url;
    const char *host; /* normalised */
    int port;
    const char *target; /* origin-form path[?query] */
    bool refresh_grant; /* grant refresh_token, else client_credentials */
    bool auth_post;     /* client_auth post, else basic */
    const char *client_id;
    const char *scope;         /* or NULL */
    const char *audience;      /* or NULL */
    const char *client_secret; /* or NULL */
    size_t client_secret_len;
    const char *refresh_token; /* as the vault holds it, or NULL */
    size_t refresh_token_len;
};

/* One exact name the vault lists (for nameConstraints and /etc/hosts lines). */
struct policy_name {
    const char *name; /* normalised */
    bool ip;          /* an IPv4/IPv6 literal */
    bool rule;        /* a rule's host_pattern */
    bool block;       /* a host_policy block entry */
    bool allow;       /* a host_policy allow entry */
};

/*
 * Reads and validates the vault at path (SPEC §3), reads env and file secrets, removes env
 * secrets from the environment. On failure returns NULL and writes one line naming the JSON
 * path to err (never a secret value).
 */
struct policy *policy_load(const char *path, char *err, size_t errlen);

/*
 * The same without reading env or file secret sources (each holds a stand-in value): for the
 * names and the routing mode only, as `vaultgate hosts` needs. Never serve with it.
 */
struct policy *policy_load_unread(const char *path, char *err, size_t errlen);

/* The same from a buffer; env secrets are read (and removed) all the same. */
struct policy *policy_parse(const char *json, size_t len, char *err, size_t errlen);

/* New reference. */
struct policy *policy_ref(struct policy *p);

/* Drops a reference and NULLs *pp; the last one wipes secrets and frees. NULL-safe. */
void policy_unref(struct policy **pp);

/*
 * Decision for a normalised host (hostname_normalize), by the host alone: which hosts a
 * connection may reach and which are intercepted (a rule's host is POLICY_INJECT with its first
 * rule, whatever the scopes). Never fails.
 */
void policy_decide(const struct policy *p, const char *host, struct policy_decision *out);

/*
 * Decision for one request (SPEC §3 "Decision for one request"): the host, then the rules'
 * scopes for the method and the target (origin-form "/path?query", or "*"). A target holding
 * '#' is 400 on every host; a host that has a rule with `paths` needs a canonical path
 * (policy/scope.h): else 400 with a fixed reason in *why and *out untouched (500 when memory
 * runs out). Otherwise 0 with *out filled: block (out_of_scope when rules match the host but
 * none admits the request, or when the request carries a method override - method_override:
 * X-HTTP-Method-Override, X-HTTP-Method or X-Method-Override - and one of those rules has
 * `methods`), inject with the first admitting rule, or allow.
 */
int policy_decide_request(const struct policy *p, const char *host, const char *method,
                          const char *target, size_t tlen, bool method_override,
                          struct policy_decision *out, const char **why);

/* host_policy.enforce is false: policy blocks are reported and forwarded (SPEC §12). */
bool policy_report_only(const struct policy *p);

/* Routing mode and the first reason, e.g. `host_policy.default is "block"`. */
enum policy_mode policy_mode(const struct policy *p, const char **reason);

const char *policy_run_id(const struct policy *p);
const char *policy_run_user(const struct policy *p);
size_t policy_rule_count(const struct policy *p);
size_t policy_host_entry_count(const struct policy *p);
size_t policy_secret_count(const struct policy *p);
void policy_rule_info(const struct policy *p, size_t idx, struct policy_rule_info *out);

/*
 * Rule idx for `vaultgate check`: one line of text into buf ("rules[0]: "api.github.com" ->
 * GITHUB_PAT (basic); methods: GET HEAD; paths: "/repos/acme""), or a JSON object (host_pattern,
 * secret, scheme, methods, paths; null for an absent scope; NULL when out of memory). Every
 * vault string passes the redactor; never a secret value.
 */
void policy_rule_describe(const struct policy *p, size_t idx, char *buf, size_t len);
cJSON *policy_rule_json(const struct policy *p, size_t idx);

/* The oauth2 sources rules use: how many, and number i. */
size_t policy_oauth_count(const struct policy *p);
void policy_oauth_info(const struct policy *p, size_t i, struct policy_oauth *out);

/*
 * The token manager's state for source i, attached before the snapshot is published (the one
 * thing set on a snapshot after policy_load; never afterwards). release(slot) runs for each
 * attached slot when the last reference to the snapshot goes, on whichever thread drops it.
 */
void policy_oauth_attach(struct policy *p, size_t i, void *slot, void (*release)(void *slot));
void *policy_oauth_slot(const struct policy *p, size_t i);

/* Exact names the vault lists, deduplicated, in vault order. Valid while p lives. */
const struct policy_name *policy_names(const struct policy *p, size_t *n);

/* Warnings (unused secret, unconstrained CA, ...) and notes (nothing to enforce). */
const char *const *policy_warnings(const struct policy *p, size_t *n);
const char *const *policy_notes(const struct policy *p, size_t *n);

const char *policy_scheme_name(enum policy_scheme s);
const char *policy_mode_name(enum policy_mode m);

#endif
