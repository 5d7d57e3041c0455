/*
 * policy.c - the run's policy snapshot: a validated vault plus everything derived from it once
 * (lookup indexes, routing mode, warnings, the names for certificates and /etc/hosts, the wire
 * forms of each secret), behind an atomic reference count.
 *
 * Guarantees: a snapshot never changes after policy_parse() returns, so any number of threads
 * may call policy_decide() on it without locks; the last policy_unref() wipes every secret byte
 * (vault values and their wire forms). policy_decide() follows SPEC §3 "Decision for one host"
 * and costs O(log n) per exact or wildcard pattern plus one regex run per `re:` pattern.
 */
#include "policy/policy.h"
#include "policy/cred.h"
#include "policy/credwire.h"
#include "policy/policy_int.h"
#include "policy/scope.h"
#include "common/caps.h"
#include "common/pct.h"
#include "common/redact.h"
#include "common/secmem.h"

#include <openssl/evp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A sorted array mapping a name (exact host or wildcard suffix) to the lowest index using it. */
struct pindex_slot {
    const char *key;
    size_t idx;
};

struct pindex {
    struct pindex_slot *slots;
    size_t n;
};

/* Exact, wildcard and regex patterns of one list (rules or host entries), split for lookup. */
struct plist {
    struct pindex exact;
    struct pindex wild;
    size_t *regex; /* indexes of `re:` patterns, ascending */
    size_t nregex;
    size_t star; /* index of a `*` pattern, or SIZE_MAX */
};

struct policy {
    atomic_size_t refs;
    struct vault *v;
    struct policy_wire *wire;
    size_t *wire_lens; /* allocation size of each wire value buffer, for wiping */
    struct plist rules, entries;
    struct plist pathrules; /* the rules with a `paths` scope (indexes into pathidx) */
    size_t *pathidx;        /* rule index of each entry of pathrules */
    size_t npathrules;
    size_t *oauth; /* secret index of each oauth2 source a rule uses */
    size_t noauth;
    void **oauth_slot; /* what the token manager attached to each (policy_oauth_attach) */
    void (*oauth_release)(void *slot);
    enum policy_mode mode;
    char *mode_reason;
    char **warnings;
    size_t nwarnings;
    char **notes;
    size_t nnotes;
    struct policy_name *names;
    size_t nnames;
};

#define NO_MATCH SIZE_MAX

/* ---- indexes ---- */

static int slot_cmp(const void *a, const void *b)
{
    const struct pindex_slot *x = a, *y = b;
    int c = strcmp(x->key, y->key);

    if (c != 0)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Lowest index >= from of the slots with this key, or NO_MATCH. */
static size_t pindex_find_from(const struct pindex *ix, const char *key, size_t from)
{
    size_t lo = 0, hi = ix->n;

    /* lower bound of (key, from) in the (key, idx) order of the slots */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(ix->slots[mid].key, key);

        if (c < 0 || (c == 0 && ix->slots[mid].idx < from))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ix->n && strcmp(ix->slots[lo].key, key) == 0)
        return ix->slots[lo].idx;
    return NO_MATCH;
}

static size_t pindex_find(const struct pindex *ix, const char *key)
{
    return pindex_find_from(ix, key, 0);
}

/* Lowest index >= from of a wildcard whose suffix lies strictly above host. */
static size_t pindex_find_suffix(const struct pindex *ix, const char *host, size_t from)
{
    size_t best = NO_MATCH, i;

    if (ix->n == 0)
        return NO_MATCH;
    for (const char *dot = strchr(host, '.'); dot != NULL; dot = strchr(dot + 1, '.')) {
        if (dot == host)
            continue;
        i = pindex_find_from(ix, dot + 1, from);
        if (i < best)
            best = i;
    }
    return best;
}

static void plist_free(struct plist *l)
{
    free(l->exact.slots);
    free(l->wild.slots);
    free(l->regex);
    memset(l, 0, sizeof(*l));
}

static int plist_add(struct plist *l, const struct hostmatch *m, size_t idx)
{
    struct pindex *ix = NULL;

    switch (hostmatch_kind(m)) {
    case HOSTMATCH_EXACT:
    case HOSTMATCH_IP:
        ix = &l->exact;
        break;
    case HOSTMATCH_WILDCARD:
        if (hostmatch_text(m)[0] == '\0') {
            if (l->star == NO_MATCH)
                l->star = idx;
            return 0;
        }
        ix = &l->wild;
        break;
    case HOSTMATCH_REGEX:
        l->regex[l->nregex++] = idx;
        return 0;
    }
    ix->slots[ix->n].key = hostmatch_text(m);
    ix->slots[ix->n++].idx = idx;
    return 0;
}

/* Builds the lookup list over n matchers reached through get(). */
static int plist_build(struct plist *l, size_t n,
                       const struct hostmatch *(*get)(const void *, size_t), const void *arg)
{
    l->star = NO_MATCH;
    l->exact.slots = calloc(n + 1, sizeof(*l->exact.slots));
    l->wild.slots = calloc(n + 1, sizeof(*l->wild.slots));
    l->regex = calloc(n + 1, sizeof(*l->regex));
    if (l->exact.slots == NULL || l->wild.slots == NULL || l->regex == NULL)
        return -1;
    for (size_t i = 0; i < n; i++)
        plist_add(l, get(arg, i), i);
    qsort(l->exact.slots, l->exact.n, sizeof(*l->exact.slots), slot_cmp);
    qsort(l->wild.slots, l->wild.n, sizeof(*l->wild.slots), slot_cmp);
    return 0;
}

static const struct hostmatch *rule_match_at(const void *arg, size_t i)
{
    return ((const struct vault *)arg)->rules[i].match;
}

static const struct hostmatch *entry_match_at(const void *arg, size_t i)
{
    return ((const struct vault *)arg)->entries[i].match;
}

/* ---- decisions ---- */

/* Any entry of the wanted kind (block or allow) that matches host. */
static bool entries_match(const struct policy *p, const char *host, bool block)
{
    const struct vault *v = p->v;
    const struct plist *l = &p->entries;
    size_t i;

    /* entry patterns are unique, so exact and wildcard lookups find at most one each */
    i = pindex_find(&l->exact, host);
    if (i != NO_MATCH && v->entries[i].block == block)
        return true;
    for (const char *dot = strchr(host, '.'); dot != NULL; dot = strchr(dot + 1, '.')) {
        i = dot == host ? NO_MATCH : pindex_find(&l->wild, dot + 1);
        if (i != NO_MATCH && v->entries[i].block == block)
            return true;
    }
    if (l->star != NO_MATCH && host[0] != '\0' && v->entries[l->star].block == block)
        return true;
    for (size_t k = 0; k < l->nregex; k++) {
        const struct vault_entry *e = &v->entries[l->regex[k]];
        int rc;

        if (e->block != block)
            continue;
        rc = hostmatch_match(e->match, host);
        if (rc == 1 || (rc < 0 && block))
            return true;
    }
    return false;
}

/*
 * Lowest index >= from of l whose pattern matches host; get() gives the matcher of an index
 * (needed for regexes only). A regex that hits its match limit counts as no match.
 */
static size_t plist_first(const struct plist *l, const char *host, size_t from,
                          const struct hostmatch *(*get)(const void *, size_t), const void *arg)
{
    size_t best = NO_MATCH, i;

    i = pindex_find_from(&l->exact, host, from);
    if (i < best)
        best = i;
    i = pindex_find_suffix(&l->wild, host, from);
    if (i < best)
        best = i;
    if (l->star != NO_MATCH && l->star >= from && l->star < best && host[0] != '\0')
        best = l->star;
    for (size_t k = 0; k < l->nregex && l->regex[k] < best; k++) {
        if (l->regex[k] >= from && hostmatch_match(get(arg, l->regex[k]), host) == 1) {
            best = l->regex[k];
            break;
        }
    }
    return best;
}

static size_t first_rule(const struct policy *p, const char *host, size_t from)
{
    return plist_first(&p->rules, host, from, rule_match_at, p->v);
}

/* A report-only vault forwards what it would block (SPEC §12): allow, without a credential. */
static void report_block(const struct policy *p, struct policy_decision *d)
{
    if (d->verdict != POLICY_BLOCK || !p->v->report_only)
        return;
    d->verdict = POLICY_ALLOW;
    d->rule = -1;
    d->reported = true;
}

void policy_decide(const struct policy *p, const char *host, struct policy_decision *out)
{
    struct policy_decision d = {.verdict = POLICY_BLOCK, .rule = -1, .designated = false};
    size_t r;

    if (host == NULL)
        host = "";
    if (entries_match(p, host, true)) {
        d.designated = true;
        d.rule_host = first_rule(p, host, 0) != NO_MATCH;
    } else if ((r = first_rule(p, host, 0)) != NO_MATCH) {
        d.verdict = POLICY_INJECT;
        d.rule = (int)r;
        d.designated = true;
        d.rule_host = true;
    } else if (entries_match(p, host, false) || !p->v->default_block) {
        d.verdict = POLICY_ALLOW;
    }
    report_block(p, &d);
    *out = d;
}

bool policy_report_only(const struct policy *p)
{
    return p->v->report_only;
}

/* The path-scoped rules whose host pattern matches host: is there any? */
static const struct hostmatch *pathrule_match_at(const void *arg, size_t i)
{
    const struct policy *p = arg;

    return p->v->rules[p->pathidx[i]].match;
}

/* 1 when rule r's scope admits the method and the decoded path (NULL when not needed). */
static bool scope_admits(const struct vault_rule *r, const char *method, const char *path,
                         size_t plen)
{
    bool ok = r->nmethods == 0;

    for (size_t i = 0; i < r->nmethods && !ok; i++)
        ok = strcmp(r->methods[i], method) == 0;
    if (!ok || r->npaths == 0)
        return ok;
    for (size_t i = 0; i < r->npaths && path != NULL; i++) {
        if (scope_prefix_admits(r->paths_dec[i], r->paths_len[i], path, plen))
            return true;
    }
    return false;
}

/* The first rule from `first` on whose host pattern matches and whose scope admits the request
 * (path decoded, or NULL when the host has no path-scoped rule), or NO_MATCH. */
static size_t first_admitting(const struct policy *p, const char *host, size_t first,
                              const char *method, const char *path, size_t plen)
{
    for (size_t r = first; r != NO_MATCH; r = first_rule(p, host, r + 1)) {
        if (scope_admits(&p->v->rules[r], method, path, plen))
            return r;
    }
    return NO_MATCH;
}

/* 1 when a rule from `first` on whose host pattern matches has a `methods` scope. */
static bool any_method_scope(const struct policy *p, const char *host, size_t first)
{
    for (size_t r = first; r != NO_MATCH; r = first_rule(p, host, r + 1)) {
        if (p->v->rules[r].nmethods > 0)
            return true;
    }
    return false;
}

int policy_decide_request(const struct policy *p, const char *host, const char *method,
                          const char *target, size_t tlen, bool method_override,
                          struct policy_decision *out, const char **why)
{
    struct policy_decision d = {.verdict = POLICY_BLOCK, .rule = -1};
    char stackbuf[1024], *dec = NULL;
    size_t first, r, plen = 0, rawlen;

    if (host == NULL)
        host = "";
    *why = NULL;
    if (memchr(target, '#', tlen) != NULL) {
        /* no fragment in a request target (RFC 9112 §3.2): the scope would stop at '#' while
         * the upstream reads on */
        *why = "fragment in the request target";
        return 400;
    }
    if (entries_match(p, host, true) || (first = first_rule(p, host, 0)) == NO_MATCH) {
        /* a blocked host, or one without rules: the host decides alone */
        policy_decide(p, host, out);
        return 0;
    }
    d.designated = true;
    d.rule_host = true;
    if (p->npathrules > 0 &&
        plist_first(&p->pathrules, host, 0, pathrule_match_at, p) != NO_MATCH) {
        rawlen = scope_path_len(target, tlen);
        if (!scope_path_canonical(target, rawlen, why))
            return 400;
        dec = rawlen <= sizeof(stackbuf) ? stackbuf : malloc(rawlen);
        if (dec == NULL) {
            *why = "out of memory";
            return 500;
        }
        plen = pct_decode(dec, target, rawlen, 0);
    }
    /* a method override would have the upstream act on a method no scope admitted */
    r = method_override && any_method_scope(p, host, first)
            ? NO_MATCH
            : first_admitting(p, host, first, method, dec, plen);
    if (r != NO_MATCH) {
        d.verdict = POLICY_INJECT;
        d.rule = (int)r;
    } else {
        d.out_of_scope = true;
    }
    report_block(p, &d);
    if (dec != stackbuf)
        free(dec);
    *out = d;
    return 0;
}

/* ---- wire forms ---- */

/*
 * Wire material of one rule: the kind's wire value (policy/cred.h), then the forms - the raw
 * secret first, then the kind's own. An oauth2 rule at load (slen 0) gets its value only.
 */
static int wire_build(const struct vault *v, const struct vault_rule *r, const char *secret,
                      size_t slen, struct policy_wire *w, size_t *alloc_len)
{
    const struct cred_kind *k = cred_kind_of(r->scheme);
    char *val = NULL;
    size_t val_len = 0;

    if (k == NULL || k->wire(r, secret, slen, &val, &val_len) != 0)
        return -1;
    w->value = val;
    w->value_len = val_len;
    *alloc_len = val_len + 1;
    if (slen == 0)
        return 0; /* an oauth2 rule's wire forms are made per token (inject_token) */
    /* The masker finds every percent-encoding of the raw form itself (the query value is one
     * of them); base64 is a form of its own, as is a sigv4 rule's session token. */
    cred_add_form(w, secret, slen, INJECT_FORM_VALUE);
    if (k->forms != NULL)
        k->forms(v, r, w);
    return 0;
}

int policy_wire_make(const struct policy *p, int rule, const char *secret, size_t len,
                     struct policy_wire *w, size_t *alloc_len)
{
    if (rule < 0 || (size_t)rule >= p->v->nrules || len == 0)
        return -1;
    memset(w, 0, sizeof(*w));
    return wire_build(p->v, &p->v->rules[rule], secret, len, w, alloc_len);
}

/* ---- derived facts: mode, warnings, notes, names ---- */

static int push_str(char ***arr, size_t *n, const char *s)
{
    char **grown = realloc(*arr, (*n + 1) * sizeof(**arr));
    char *copy = strdup(s);

    if (grown != NULL)
        *arr = grown;
    if (grown == NULL || copy == NULL) {
        free(copy);
        return -1;
    }
    (*arr)[(*n)++] = copy;
    return 0;
}

static const char *kind_phrase(const struct hostmatch *m)
{
    return hostmatch_kind(m) == HOSTMATCH_REGEX ? "a regular expression" : "a wildcard";
}

static bool is_pattern(const struct hostmatch *m)
{
    return hostmatch_kind(m) == HOSTMATCH_WILDCARD || hostmatch_kind(m) == HOSTMATCH_REGEX;
}

/* The first catch-all reason in the order of SPEC §3, or the default-mode explanation. */
static int derive_mode(struct policy *p)
{
    const struct vault *v = p->v;
    char buf[512], q[300];

    p->mode = POLICY_MODE_CATCHALL;
    if (v->default_block) {
        snprintf(buf, sizeof(buf), "host_policy.default is \"block\"");
        goto done;
    }
    for (size_t i = 0; i < v->nentries; i++) {
        if (v->entries[i].block && is_pattern(v->entries[i].match)) {
            vault_quote(q, sizeof(q), v->entries[i].pattern);
            snprintf(buf, sizeof(buf), "host_policy.hosts[%s] is %s block entry", q,
                     kind_phrase(v->entries[i].match));
            goto done;
        }
    }
    for (size_t i = 0; i < v->nrules; i++) {
        if (is_pattern(v->rules[i].match)) {
            vault_quote(q, sizeof(q), v->rules[i].pattern);
            snprintf(buf, sizeof(buf), "rules[%zu].host_pattern %s is %s", i, q,
                     kind_phrase(v->rules[i].match));
            goto done;
        }
    }
    p->mode = POLICY_MODE_DEFAULT;
    snprintf(buf, sizeof(buf), "every designated host is an exact name or IP literal");
done:
    p->mode_reason = strdup(buf);
    return p->mode_reason == NULL ? -1 : 0;
}

static int derive_messages(struct policy *p)
{
    const struct vault *v = p->v;
    bool any_block = false;
    char buf[160], name[VG_SECRET_NAME_MAX + 1];

    for (size_t i = 0; i < v->nsecrets; i++) {
        if (v->secrets[i].used)
            continue;
        /* a name is echoed through the redactor too: AKIA... is a valid secret name */
        snprintf(buf, sizeof(buf), "secret %s is not used by any rule",
                 redact_copy(name, sizeof(name), v->secrets[i].name));
        if (push_str(&p->warnings, &p->nwarnings, buf) != 0)
            return -1;
    }
    /* a fact of catch-all routing, not something to act on: a note (SPEC §7's `enforcement`
     * turns degraded on any warning, and every catch-all run would otherwise be degraded) */
    if (p->mode == POLICY_MODE_CATCHALL &&
        push_str(&p->notes, &p->nnotes, "CA unconstrained (catch-all routing)") != 0)
        return -1;
    for (size_t i = 0; i < v->nentries; i++)
        any_block = any_block || v->entries[i].block;
    if (v->report_only &&
        push_str(&p->notes, &p->nnotes, "report-only: refusals are recorded, not enforced") != 0)
        return -1;
    if (v->nrules == 0 && !any_block && !v->default_block &&
        push_str(&p->notes, &p->nnotes,
                 "nothing to enforce: no rules, no block entries and an allow default") != 0)
        return -1;
    return 0;
}

static void add_name(struct policy *p, const struct hostmatch *m, bool rule, bool block)
{
    struct policy_name *n = NULL;
    const char *text = hostmatch_text(m);

    if (hostmatch_kind(m) != HOSTMATCH_EXACT && hostmatch_kind(m) != HOSTMATCH_IP)
        return;
    for (size_t i = 0; i < p->nnames && n == NULL; i++) {
        if (strcmp(p->names[i].name, text) == 0)
            n = &p->names[i];
    }
    if (n == NULL) {
        n = &p->names[p->nnames++];
        n->name = text;
        n->ip = hostmatch_kind(m) == HOSTMATCH_IP;
    }
    n->rule = n->rule || rule;
    n->block = n->block || (!rule && block);
    n->allow = n->allow || (!rule && !block);
}

static int derive_names(struct policy *p)
{
    const struct vault *v = p->v;

    p->names = calloc(v->nrules + v->nentries + 1, sizeof(*p->names));
    if (p->names == NULL)
        return -1;
    for (size_t i = 0; i < v->nrules; i++)
        add_name(p, v->rules[i].match, true, false);
    for (size_t i = 0; i < v->nentries; i++)
        add_name(p, v->entries[i].match, false, v->entries[i].block);
    return 0;
}

/* ---- life cycle ---- */

static int policy_build(struct policy *p)
{
    const struct vault *v = p->v;

    p->wire = calloc(v->nrules + 1, sizeof(*p->wire));
    p->wire_lens = calloc(v->nrules + 1, sizeof(*p->wire_lens));
    if (p->wire == NULL || p->wire_lens == NULL)
        return -1;
    for (size_t i = 0; i < v->nrules; i++) {
        const struct vault_secret *sec = &v->secrets[v->rules[i].secret];

        /* an oauth2 secret has no value yet: an empty wire, made per token at run time */
        if (wire_build(v, &v->rules[i], sec->oauth != NULL ? "" : sec->value,
                       sec->oauth != NULL ? 0 : sec->len, &p->wire[i], &p->wire_lens[i]) != 0)
            return -1;
    }
    if (plist_build(&p->rules, v->nrules, rule_match_at, v) != 0 ||
        plist_build(&p->entries, v->nentries, entry_match_at, v) != 0)
        return -1;
    p->pathidx = calloc(v->nrules + 1, sizeof(*p->pathidx));
    if (p->pathidx == NULL)
        return -1;
    for (size_t i = 0; i < v->nrules; i++) {
        if (v->rules[i].npaths > 0)
            p->pathidx[p->npathrules++] = i;
    }
    if (plist_build(&p->pathrules, p->npathrules, pathrule_match_at, p) != 0)
        return -1;
    p->oauth = calloc(v->nsecrets + 1, sizeof(*p->oauth));
    p->oauth_slot = calloc(v->nsecrets + 1, sizeof(*p->oauth_slot));
    if (p->oauth == NULL || p->oauth_slot == NULL)
        return -1;
    for (size_t i = 0; i < v->nsecrets; i++) {
        for (size_t r = 0; v->secrets[i].oauth != NULL && r < v->nrules; r++) {
            if (v->rules[r].secret == i) {
                p->oauth[p->noauth++] = i;
                break;
            }
        }
    }
    if (derive_mode(p) != 0 || derive_messages(p) != 0 || derive_names(p) != 0)
        return -1;
    return 0;
}

static void policy_free(struct policy *p)
{
    for (size_t i = 0; p->wire != NULL && i < p->v->nrules; i++) {
        char *val = (char *)p->wire[i].value;

        secmem_free(&val, p->wire_lens[i]);
    }
    free(p->wire);
    free(p->wire_lens);
    plist_free(&p->rules);
    plist_free(&p->entries);
    plist_free(&p->pathrules);
    free(p->pathidx);
    for (size_t i = 0; i < p->noauth; i++) {
        if (p->oauth_slot[i] != NULL && p->oauth_release != NULL)
            p->oauth_release(p->oauth_slot[i]);
    }
    free(p->oauth);
    free(p->oauth_slot);
    for (size_t i = 0; i < p->nwarnings; i++)
        free(p->warnings[i]);
    for (size_t i = 0; i < p->nnotes; i++)
        free(p->notes[i]);
    free(p->warnings);
    free(p->notes);
    free(p->names);
    free(p->mode_reason);
    vault_free(&p->v);
    free(p);
}

/* Takes ownership of v (freed on failure too). */
static struct policy *policy_from_vault_take(struct vault *v, char *err, size_t errlen)
{
    char scratch[8];
    struct policy *p;

    if (v == NULL)
        return NULL;
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL) {
        vault_free(&v);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    atomic_init(&p->refs, 1);
    p->v = v;
    if (policy_build(p) != 0) {
        policy_free(p);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    return p;
}

struct policy *policy_load(const char *path, char *err, size_t errlen)
{
    return policy_from_vault_take(vault_load(path, err, errlen), err, errlen);
}

struct policy *policy_load_unread(const char *path, char *err, size_t errlen)
{
    return policy_from_vault_take(vault_load_unread(path, err, errlen), err, errlen);
}

struct policy *policy_parse(const char *json, size_t len, char *err, size_t errlen)
{
    return policy_from_vault_take(vault_parse(json, len, err, errlen), err, errlen);
}

struct policy *policy_ref(struct policy *p)
{
    if (p != NULL)
        atomic_fetch_add_explicit(&p->refs, 1, memory_order_relaxed);
    return p;
}

void policy_unref(struct policy **pp)
{
    struct policy *p;

    if (pp == NULL || *pp == NULL)
        return;
    p = *pp;
    *pp = NULL;
    if (atomic_fetch_sub_explicit(&p->refs, 1, memory_order_acq_rel) == 1)
        policy_free(p);
}

/* ---- accessors ---- */

enum policy_mode policy_mode(const struct policy *p, const char **reason)
{
    if (reason != NULL)
        *reason = p->mode_reason;
    return p->mode;
}

const char *policy_run_id(const struct policy *p)
{
    return p->v->run_id;
}

const char *policy_run_user(const struct policy *p)
{
    return p->v->run_user;
}

size_t policy_rule_count(const struct policy *p)
{
    return p->v->nrules;
}

size_t policy_host_entry_count(const struct policy *p)
{
    return p->v->nentries;
}

size_t policy_secret_count(const struct policy *p)
{
    return p->v->nsecrets;
}

void policy_rule_info(const struct policy *p, size_t idx, struct policy_rule_info *out)
{
    const struct vault_rule *r;

    if (idx >= p->v->nrules)
        return;
    r = &p->v->rules[idx];
    out->host_pattern = r->pattern;
    out->secret_name = p->v->secrets[r->secret].name;
    out->scheme = r->scheme;
    out->name = r->name;
    out->username = r->username;
    out->methods = (const char *const *)r->methods;
    out->nmethods = r->nmethods;
    out->paths = (const char *const *)r->paths;
    out->npaths = r->npaths;
    out->region = r->region;
    out->service = r->service;
    out->oauth = -1;
    out->per_request = cred_kind_of(r->scheme) != NULL && cred_kind_of(r->scheme)->sign != NULL;
    for (size_t i = 0; i < p->noauth; i++) {
        if (p->oauth[i] == r->secret)
            out->oauth = (int)i;
    }
}

size_t policy_oauth_count(const struct policy *p)
{
    return p->noauth;
}

void policy_oauth_info(const struct policy *p, size_t i, struct policy_oauth *out)
{
    const struct vault_secret *s;
    const struct vault_oauth *o;

    if (i >= p->noauth)
        return;
    s = &p->v->secrets[p->oauth[i]];
    o = s->oauth;
    out->secret_name = s->name;
    out->token_url = o->token_url;
    out->host = o->host;
    out->port = o->port;
    out->target = o->target;
    out->refresh_grant = o->refresh_grant;
    out->auth_post = o->auth_post;
    out->client_id = o->client_id;
    out->scope = o->scope;
    out->audience = o->audience;
    out->client_secret =
        o->client_secret != SIZE_MAX ? p->v->secrets[o->client_secret].value : NULL;
    out->client_secret_len = o->client_secret != SIZE_MAX ? p->v->secrets[o->client_secret].len : 0;
    out->refresh_token =
        o->refresh_token != SIZE_MAX ? p->v->secrets[o->refresh_token].value : NULL;
    out->refresh_token_len = o->refresh_token != SIZE_MAX ? p->v->secrets[o->refresh_token].len : 0;
}

void policy_oauth_attach(struct policy *p, size_t i, void *slot, void (*release)(void *slot))
{
    if (i >= p->noauth)
        return;
    p->oauth_slot[i] = slot;
    p->oauth_release = release;
}

void *policy_oauth_slot(const struct policy *p, size_t i)
{
    return i < p->noauth ? p->oauth_slot[i] : NULL;
}

/* Appends to buf (size len, used *o) what fmt makes. */
static void describe_add(char *buf, size_t len, size_t *o, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void describe_add(char *buf, size_t len, size_t *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (*o >= len)
        return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *o, len - *o, fmt, ap);
    va_end(ap);
    if (n > 0)
        *o = *o + (size_t)n < len ? *o + (size_t)n : len - 1;
}

void policy_rule_describe(const struct policy *p, size_t idx, char *buf, size_t len)
{
    const struct cred_kind *k;
    const struct vault_rule *r;
    char q[300], name[VG_SECRET_NAME_MAX + 1];
    size_t o = 0;

    if (len == 0)
        return;
    buf[0] = '\0';
    if (idx >= p->v->nrules)
        return;
    r = &p->v->rules[idx];
    k = cred_kind_of(r->scheme);
    vault_quote(q, sizeof(q), r->pattern);
    describe_add(buf, len, &o, "rules[%zu]: %s -> %s (%s", idx, q,
                 redact_copy(name, sizeof(name), p->v->secrets[r->secret].name),
                 policy_scheme_name(r->scheme));
    if (k != NULL && k->describe != NULL) {
        char more[CRED_DESCRIBE_MAX];

        k->describe(r, more, sizeof(more));
        describe_add(buf, len, &o, "%s", more);
    }
    if (p->v->secrets[r->secret].oauth != NULL) {
        const struct vault_oauth *oa = p->v->secrets[r->secret].oauth;

        describe_add(buf, len, &o, ", oauth2 %s from %s",
                     oa->refresh_grant ? "refresh_token" : "client_credentials", oa->host);
    }
    describe_add(buf, len, &o, "); methods:");
    for (size_t i = 0; i < r->nmethods; i++)
        describe_add(buf, len, &o, " %s", r->methods[i]);
    describe_add(buf, len, &o, "%s; paths:", r->nmethods == 0 ? " any" : "");
    for (size_t i = 0; i < r->npaths; i++) {
        vault_quote(q, sizeof(q), r->paths[i]);
        describe_add(buf, len, &o, " %s", q);
    }
    describe_add(buf, len, &o, "%s", r->npaths == 0 ? " any" : "");
}

/* An array of the strings v[0..n), each through the redactor, or JSON null when n is 0. */
static cJSON *describe_array(char *const *v, size_t n)
{
    char shown[VG_PATTERN_MAX + REDACT_TOKEN_RUN + 1];
    cJSON *a = n > 0 ? cJSON_CreateArray() : cJSON_CreateNull();

    for (size_t i = 0; a != NULL && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(redact_copy(shown, sizeof(shown), v[i])));
    return a;
}

cJSON *policy_rule_json(const struct policy *p, size_t idx)
{
    char shown[VG_PATTERN_MAX + REDACT_TOKEN_RUN + 1];
    const struct cred_kind *k;
    const struct vault_rule *r;
    cJSON *o;

    if (idx >= p->v->nrules || (o = cJSON_CreateObject()) == NULL)
        return NULL;
    r = &p->v->rules[idx];
    k = cred_kind_of(r->scheme);
    cJSON_AddStringToObject(o, "host_pattern", redact_copy(shown, sizeof(shown), r->pattern));
    cJSON_AddStringToObject(o, "secret",
                            redact_copy(shown, sizeof(shown), p->v->secrets[r->secret].name));
    cJSON_AddStringToObject(o, "scheme", policy_scheme_name(r->scheme));
    if (k != NULL && k->json != NULL)
        k->json(r, o);
    if (p->v->secrets[r->secret].oauth != NULL) {
        const struct vault_oauth *oa = p->v->secrets[r->secret].oauth;

        cJSON_AddStringToObject(o, "oauth2_grant",
                                oa->refresh_grant ? "refresh_token" : "client_credentials");
        cJSON_AddStringToObject(o, "token_host", oa->host);
    }
    cJSON_AddItemToObject(o, "methods", describe_array(r->methods, r->nmethods));
    cJSON_AddItemToObject(o, "paths", describe_array(r->paths, r->npaths));
    return o;
}

const struct policy_name *policy_names(const struct policy *p, size_t *n)
{
    *n = p->nnames;
    return p->names;
}

const char *const *policy_warnings(const struct policy *p, size_t *n)
{
    *n = p->nwarnings;
    return (const char *const *)p->warnings;
}

const char *const *policy_notes(const struct policy *p, size_t *n)
{
    *n = p->nnotes;
    return (const char *const *)p->notes;
}

const char *policy_scheme_name(enum policy_scheme s)
{
    const struct cred_kind *k = cred_kind_of(s);

    return k != NULL ? k->name : "unknown";
}

const char *policy_mode_name(enum policy_mode m)
{
    return m == POLICY_MODE_CATCHALL ? "catch-all" : "default";
}

const struct vault *policy_vault(const struct policy *p)
{
    return p->v;
}

const struct policy_wire *policy_wire(const struct policy *p, int rule)
{
    if (p == NULL || rule < 0 || (size_t)rule >= p->v->nrules)
        return NULL;
    return &p->wire[rule];
}
