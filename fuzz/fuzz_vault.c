/*
 * fuzz_vault.c - bytes -> policy_parse(); for a valid vault, the routing mode, the names and
 * policy_decide() on hosts derived from the vault, checked against a naive reference decision;
 * policy_decide_request() on requests derived from the rules' scopes (methods, path prefixes
 * and their neighbours, with and without a method override), checked against a naive walk of every
 * rule; both under the vault's host_policy.enforce (SPEC §12: a report-only block is a reported
 * allow); injection and the check description for every rule. Invariants: errors are one non-empty
 * line; both decisions agree with the reference; inject_forms gives 1..INJECT_MAX_FORMS forms;
 * nothing leaks.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/hostname.h"
#include "common/pct.h"
#include "policy/inject.h"
#include "policy/policy.h"
#include "policy/policy_int.h"
#include "policy/scope.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* SPEC §12: a report-only vault forwards what it would block, without a rule. */
static void reference_report(const struct vault *v, struct policy_decision *d)
{
    if (d->verdict != POLICY_BLOCK || !v->report_only)
        return;
    d->verdict = POLICY_ALLOW;
    d->rule = -1;
    d->reported = true;
}

/* SPEC §3 "Decision for one host", written the slow and obvious way. */
static void reference_host(const struct vault *v, const char *host, struct policy_decision *d)
{
    d->rule = -1;
    d->designated = false;
    d->reported = false;
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

static void reference(const struct vault *v, const char *host, struct policy_decision *d)
{
    reference_host(v, host, d);
    reference_report(v, d);
}

/* SPEC §3 "Decision for one request", the slow way: every rule in order. Returns 0 or 400. */
static int reference_request(const struct vault *v, const char *host, const char *method,
                             const char *target, bool override, struct policy_decision *d)
{
    size_t rawlen = scope_path_len(target, strlen(target)), plen;
    char dec[SCOPE_PATH_MAX + 64];
    const char *why;
    bool any_rule = false, any_paths = false, any_methods = false;

    if (strchr(target, '#') != NULL)
        return 400;
    reference(v, host, d);
    if (d->verdict != POLICY_INJECT)
        return 0;
    for (size_t i = 0; i < v->nrules; i++) {
        if (hostmatch_match(v->rules[i].match, host) == 1) {
            any_rule = true;
            any_paths = any_paths || v->rules[i].npaths > 0;
            any_methods = any_methods || v->rules[i].nmethods > 0;
        }
    }
    if (any_rule && any_paths && !scope_path_canonical(target, rawlen, &why))
        return 400;
    if (override && any_methods) {
        d->verdict = POLICY_BLOCK;
        d->rule = -1;
        d->out_of_scope = true;
        reference_report(v, d);
        return 0;
    }
    plen = pct_decode(dec, target, rawlen, 0);
    for (size_t i = 0; i < v->nrules; i++) {
        const struct vault_rule *r = &v->rules[i];
        bool m = r->nmethods == 0, pa = r->npaths == 0;

        if (hostmatch_match(r->match, host) != 1)
            continue;
        for (size_t k = 0; k < r->nmethods; k++)
            m = m || strcmp(r->methods[k], method) == 0;
        for (size_t k = 0; k < r->npaths; k++) {
            size_t n = r->paths_len[k];

            pa = pa || (plen >= n && memcmp(r->paths_dec[k], dec, n) == 0 &&
                        (plen == n || dec[n] == '/' || (n > 0 && dec[n - 1] == '/')));
        }
        if (m && pa) {
            d->rule = (int)i;
            return 0;
        }
    }
    d->verdict = POLICY_BLOCK;
    d->rule = -1;
    d->out_of_scope = true;
    reference_report(v, d);
    return 0;
}

/* The request, without and with a method override field. */
static void check_request(const struct policy *p, const char *host, const char *method,
                          const char *target)
{
    for (int override = 0; override < 2; override++) {
        struct policy_decision got = {0}, want = {0};
        const char *why = NULL;
        int gst = policy_decide_request(p, host, method, target, strlen(target), override != 0,
                                        &got, &why);
        int wst = reference_request(policy_vault(p), host, method, target, override != 0, &want);

        if (gst != wst || (gst == 0 && (got.verdict != want.verdict || got.rule != want.rule ||
                                        got.out_of_scope != want.out_of_scope ||
                                        got.reported != want.reported))) {
            fprintf(stderr, "request decision mismatch for %s %s\n", method, host);
            abort();
        }
    }
}

/* Requests around rule r's scope on host. */
static void check_scope_requests(const struct policy *p, const struct vault_rule *r,
                                 const char *host)
{
    static const char *const methods[] = {"GET", "POST", "DELETE", "get"};
    static const char *const tails[] = {"",      "/",    "/x",   "-evil",  "x",
                                        "/../y", "/%2e", "?q=1", "#/../y", "/%00"};
    char target[SCOPE_PATH_MAX + 16];

    for (size_t m = 0; m < sizeof(methods) / sizeof(methods[0]); m++)
        check_request(p, host, methods[m], "/");
    for (size_t i = 0; i < r->nmethods; i++)
        check_request(p, host, r->methods[i], "/a");
    for (size_t i = 0; i < r->npaths && i < 4; i++) {
        for (size_t k = 0; k < sizeof(tails) / sizeof(tails[0]); k++) {
            snprintf(target, sizeof(target), "%s%s", r->paths[i], tails[k]);
            check_request(p, host, r->nmethods > 0 ? r->methods[0] : "GET", target);
        }
    }
}

static void check_host(const struct policy *p, const char *host)
{
    struct policy_decision got, want;

    policy_decide(p, host, &got);
    reference(policy_vault(p), host, &want);
    if (got.verdict != want.verdict || got.rule != want.rule || got.designated != want.designated ||
        got.reported != want.reported) {
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
    struct policy_rule_info ri0;
    size_t n = inject_forms(p, (int)rule, forms);

    policy_rule_info(p, rule, &ri0);
    if (ri0.oauth >= 0) {
        /* a token at run time: no forms now, inject_apply refuses, inject_token works */
        struct inject_token *t;

        if (n != 0 || ri0.oauth >= (int)policy_oauth_count(p))
            abort();
        httphead_init(&h);
        if (httphead_set_request_line(&h, "GET", 3, "/x?key=1", 8, 1) == 0) {
            if (inject_apply(&h, p, (int)rule) == 0)
                abort();
            t = inject_token_apply(&h, p, (int)rule, "fuzz-token", 10);
            if (t == NULL || inject_token_forms(t, forms) < 1)
                abort();
            inject_token_free(&t);
        }
        httphead_reset(&h);
        return;
    }
    if (n < 1 || n > INJECT_MAX_FORMS)
        abort();
    httphead_init(&h);
    if (httphead_set_request_line(&h, "GET", 3, "/x?key=1&k=2", 12, 1) == 0 &&
        httphead_add(&h, "Host", 4, "h.example", 9) == 0 &&
        httphead_add(&h, "Authorization", 13, "Bearer placeholder", 18) == 0) {
        struct policy_rule_info ri;
        char sig[SIGV4_HEX_LEN + 1];

        policy_rule_info(p, rule, &ri);
        if (ri.per_request) {
            if (inject_apply(&h, p, (int)rule) == 0 ||
                inject_sigv4(&h, p, (int)rule, SIGV4_EMPTY_SHA256, 1700000000, sig) != 0 ||
                httphead_count(&h, "Authorization") != 1)
                abort();
        } else {
            (void)inject_apply(&h, p, (int)rule);
        }
    }
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
    for (size_t i = 0; i < policy_oauth_count(p); i++) {
        struct policy_oauth oi;

        policy_oauth_info(p, i, &oi);
        if (oi.host == NULL || oi.target == NULL || oi.target[0] != '/' || oi.port < 1 ||
            oi.port > 65535 || (oi.refresh_grant && oi.refresh_token == NULL) ||
            (!oi.refresh_grant && oi.client_secret == NULL))
            abort();
    }
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        check_host(p, fixed[i]);
    for (size_t i = 0; i < v->nrules; i++) {
        char line[512];

        check_pattern_hosts(p, v->rules[i].match);
        check_inject(p, i);
        if (hostmatch_kind(v->rules[i].match) == HOSTMATCH_EXACT ||
            hostmatch_kind(v->rules[i].match) == HOSTMATCH_IP)
            check_scope_requests(p, &v->rules[i], hostmatch_text(v->rules[i].match));
        policy_rule_describe(p, i, line, sizeof(line));
        cJSON_Delete(policy_rule_json(p, i));
    }
    for (size_t i = 0; i < v->nentries; i++)
        check_pattern_hosts(p, v->entries[i].match);
    policy_unref(&p);
    return 0;
}
