/*
 * fuzz_vault.c - bytes -> policy_parse(); for a valid vault, the routing mode, the names and
 * policy_decide() on hosts derived from the vault, checked against a naive reference decision,
 * and injection for every rule. Invariants: errors are one non-empty line; decide agrees with
 * the reference; inject_forms gives 1..INJECT_MAX_FORMS forms; nothing leaks.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostname.h"
#include "policy/inject.h"
#include "policy/policy.h"
#include "policy/policy_int.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* SPEC §3 "Decision for one host", written the slow and obvious way. */
static void reference(const struct vault *v, const char *host, struct policy_decision *d)
{
    d->rule = -1;
    d->designated = false;
    for (size_t i = 0; i < v->nentries; i++) {
        if (v->entries[i].block && hostmatch_match(v->entries[i].match, host) != 0) {
            d->verdict = POLICY_BLOCK;
            d->designated = true;
            return;
        }
    }
    for (size_t i = 0; i < v->nrules; i++) {
        if (hostmatch_match(v->rules[i].match, host) == 1) {
            d->verdict = POLICY_INJECT;
            d->rule = (int)i;
            d->designated = true;
            return;
        }
    }
    for (size_t i = 0; i < v->nentries; i++) {
        if (!v->entries[i].block && hostmatch_match(v->entries[i].match, host) == 1) {
            d->verdict = POLICY_ALLOW;
            return;
        }
    }
    d->verdict = v->default_block ? POLICY_BLOCK : POLICY_ALLOW;
}

static void check_host(const struct policy *p, const char *host)
{
    struct policy_decision got, want;

    policy_decide(p, host, &got);
    reference(policy_vault(p), host, &want);
    if (got.verdict != want.verdict || got.rule != want.rule || got.designated != want.designated) {
        fprintf(stderr, "decision mismatch for host %s\n", host);
        abort();
    }
}

static void check_pattern_hosts(const struct policy *p, const struct hostmatch *m)
{
    char host[HOSTNAME_BUFSZ + 8];
    const char *t = hostmatch_text(m);

    switch (hostmatch_kind(m)) {
    case HOSTMATCH_EXACT:
    case HOSTMATCH_IP:
        check_host(p, t);
        break;
    case HOSTMATCH_WILDCARD:
        check_host(p, t);
        snprintf(host, sizeof(host), "a.%s", t);
        check_host(p, host);
        snprintf(host, sizeof(host), "x.y.%s", t);
        check_host(p, host);
        snprintf(host, sizeof(host), "evil%s", t);
        check_host(p, host);
        break;
    case HOSTMATCH_REGEX:
        break;
    }
}

static void check_inject(const struct policy *p, size_t rule)
{
    struct inject_form forms[INJECT_MAX_FORMS];
    struct http_head h;
    size_t n = inject_forms(p, (int)rule, forms);

    if (n < 1 || n > INJECT_MAX_FORMS)
        abort();
    httphead_init(&h);
    if (httphead_set_request_line(&h, "GET", 3, "/x?key=1&k=2", 12, 1) == 0 &&
        httphead_add(&h, "Authorization", 13, "Bearer placeholder", 18) == 0)
        (void)inject_apply(&h, p, (int)rule);
    httphead_reset(&h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const fixed[] = {"example.com", "a.b.example.com", "10.0.0.1", "::1",
                                        "localhost",   "api.openai.com",  ""};
    char err[512] = "";
    const char *reason = NULL;
    struct policy *p = policy_parse((const char *)data, size, err, sizeof(err));
    const struct vault *v;
    size_t n;

    if (p == NULL) {
        if (err[0] == '\0' || strchr(err, '\n') != NULL)
            abort();
        return 0;
    }
    v = policy_vault(p);
    if (policy_mode(p, &reason) > POLICY_MODE_CATCHALL || reason == NULL)
        abort();
    (void)policy_names(p, &n);
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        check_host(p, fixed[i]);
    for (size_t i = 0; i < v->nrules; i++) {
        check_pattern_hosts(p, v->rules[i].match);
        check_inject(p, i);
    }
    for (size_t i = 0; i < v->nentries; i++)
        check_pattern_hosts(p, v->entries[i].match);
    policy_unref(&p);
    return 0;
}
