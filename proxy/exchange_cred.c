/*
 * exchange_cred.c - the credential of one request (SPEC §3): the static schemes injected into
 * the head, OAuth 2.0 access tokens from the token manager (a request that finds none valid
 * waits, parked on its worker, until the manager has one or fails; 502 while the endpoint
 * fails), and AWS Signature Version 4, for which the exchange hashes the body it forwards
 * before it signs (buffering up to VG_SIGV4_BODY_MAX and answering Expect: 100-continue itself),
 * refuses what it cannot sign (streaming payloads, presigned URLs: 501), and masks the secret
 * key, the session token and the request's signature in the response.
 *
 * Guarantees: the head is signed with the real key only after every byte of the body that goes
 * upstream was hashed, and that body goes upstream unchanged with its Content-Length; the
 * buffered body lives in blocks that are wiped (OPENSSL_cleanse) when libevent or the exchange
 * lets go of them, never copied into chains of libevent's own on the HTTP/1.1 path, and never
 * logged; all buffered bodies of the process together stay under VG_SIGV4_BUFFER_TOTAL (503
 * past it), one body under VG_SIGV4_BODY_MAX (413).
 */
#include "proxy/exchange_int.h"
#include "common/caps.h"
#include "common/sechist.h"
#include "common/secmem.h"
#include "policy/inject.h"
#include "policy/policy.h"
#include "proxy/oauth.h"
#include "proxy/worker.h"
#include "proxy/reason.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

/* Bytes of buffered SigV4 bodies (block capacities) in the whole process. */
static _Atomic size_t sig_total;

static bool sig_reserve(size_t n)
{
    size_t before = atomic_fetch_add(&sig_total, n);

    if (before + n <= VG_SIGV4_BUFFER_TOTAL)
        return true;
    atomic_fetch_sub(&sig_total, n);
    return false;
}

/* evbuffer_add_reference cleanup of a block: wiped, freed, given back to the budget. */
static void sig_block_release(const void *data, size_t datalen, void *extra)
{
    size_t cap = (size_t)(uintptr_t)extra;

    (void)datalen;
    OPENSSL_cleanse((void *)data, cap);
    free((void *)data);
    atomic_fetch_sub(&sig_total, cap);
}

/* Hands the block being filled to sig_body (by reference). 0 or -1. */
static int sig_block_close(struct exchange *x)
{
    if (x->cred.sig_blk == NULL)
        return 0;
    if (x->cred.sig_blk_used == 0) {
        sig_block_release(x->cred.sig_blk, 0, (void *)(uintptr_t)x->cred.sig_blk_cap);
    } else if (evbuffer_add_reference(x->cred.sig_body, x->cred.sig_blk, x->cred.sig_blk_used,
                                      sig_block_release,
                                      (void *)(uintptr_t)x->cred.sig_blk_cap) < 0) {
        sig_block_release(x->cred.sig_blk, 0, (void *)(uintptr_t)x->cred.sig_blk_cap);
        x->cred.sig_blk = NULL;
        return -1;
    }
    x->cred.sig_blk = NULL;
    x->cred.sig_blk_cap = x->cred.sig_blk_used = 0;
    return 0;
}

/* A new block of cap bytes within the budget: 0, -1 out of memory, -2 over the budget. */
static int sig_block_open(struct exchange *x, size_t cap)
{
    if (!sig_reserve(cap))
        return -2;
    x->cred.sig_blk = malloc(cap);
    if (x->cred.sig_blk == NULL) {
        atomic_fetch_sub(&sig_total, cap);
        return -1;
    }
    x->cred.sig_blk_cap = cap;
    x->cred.sig_blk_used = 0;
    return 0;
}

/* ---- waiting for a token: the worker's list of parked exchanges ------------------------- */

static void cred_token_timeout(struct exchange *x);

static void park_unlink(struct exchange *x)
{
    if (x->park_list == NULL)
        return;
    if (x->park_prev != NULL)
        x->park_prev->park_next = x->park_next;
    else
        *x->park_list = x->park_next;
    if (x->park_next != NULL)
        x->park_next->park_prev = x->park_prev;
    x->park_prev = x->park_next = NULL;
    x->park_list = NULL;
}

static void park_link(struct exchange *x, void **list)
{
    x->park_prev = NULL;
    x->park_next = *list;
    if (x->park_next != NULL)
        x->park_next->park_prev = x;
    *list = x;
    x->park_list = list;
}

void exch_cred_free(struct exchange *x)
{
    park_unlink(x);
    for (size_t i = 0; i < x->cred.nhtok; i++)
        inject_token_free(&x->cred.htok[i]);
    free(x->cred.htok);
    free(x->cred.hforms);
    x->cred.htok = NULL;
    x->cred.hforms = NULL;
    x->cred.nhtok = x->cred.nhforms = 0;
    inject_token_free(&x->cred.itok);
    oauth_tok_unref(&x->cred.otok);
    sigv4_hash_free(&x->cred.sig_hash);
    if (x->cred.sig_blk != NULL)
        sig_block_release(x->cred.sig_blk, 0, (void *)(uintptr_t)x->cred.sig_blk_cap);
    x->cred.sig_blk = NULL;
    if (x->cred.sig_body != NULL)
        evbuffer_free(x->cred.sig_body); /* runs the blocks' cleanups */
    x->cred.sig_body = NULL;
    OPENSSL_cleanse(x->cred.sig, sizeof(x->cred.sig));
}

/* ---- the forms the masker looks for ---------------------------------------------------- */

static void cred_forms(struct exchange *x, const char *extra, size_t extra_len)
{
    x->cred.nforms = inject_forms(x->policy, x->rule, x->cred.forms);
    if (extra != NULL && x->cred.nforms < INJECT_MAX_FORMS) {
        x->cred.forms[x->cred.nforms].bytes = (const unsigned char *)extra;
        x->cred.forms[x->cred.nforms].len = extra_len;
        x->cred.forms[x->cred.nforms++].flags = INJECT_FORM_VALUE; /* sent as it is: a value */
        x->cred.forms_dynamic = true;
    }
}

/* Appends n forms to x->cred.hforms (*cap entries allocated). 0 or -1. */
static int hforms_push(struct exchange *x, const struct inject_form *f, size_t n, size_t *cap)
{
    if (x->cred.nhforms + n > *cap) {
        size_t ncap = (x->cred.nhforms + n) * 2;
        struct inject_form *nf;

        if (ncap > VG_MASK_FORMS_MAX)
            ncap = VG_MASK_FORMS_MAX;
        if (x->cred.nhforms + n > ncap ||
            (nf = realloc(x->cred.hforms, ncap * sizeof(*nf))) == NULL)
            return -1;
        x->cred.hforms = nf;
        *cap = ncap;
    }
    memcpy(x->cred.hforms + x->cred.nhforms, f, n * sizeof(*f));
    x->cred.nhforms += n;
    return 0;
}

/* The wire forms of the earlier value v (kept in x->cred.htok), after the current ones. 0 or -1. */
static int history_add(struct exchange *x, const char *v, size_t len, size_t *cap)
{
    struct inject_form f[INJECT_MAX_FORMS];
    struct inject_token *t = inject_token_make(x->policy, x->rule, v, len);

    if (t == NULL)
        return -1;
    x->cred.htok[x->cred.nhtok++] = t;
    return hforms_push(x, f, inject_token_forms(t, f), cap);
}

/*
 * Every value the rule's secret held earlier in the run (a token a refresh or a 401 replaced, a
 * value a reload replaced: common/sechist.h) is masked as the current one is (SPEC §4): its
 * wire forms join the current ones in x->cred.hforms. The current value (x->cred.forms[0], the raw
 * secret or token) is not repeated. The masker is then this request's alone. 0 or -1 (out of
 * memory, or more forms than one masker takes).
 */
static int cred_history(struct exchange *x)
{
    struct sechist_vals *v = NULL;
    struct policy_rule_info ri;
    size_t n, cap = 0;
    int rc = -1;

    policy_rule_info(x->policy, (size_t)x->rule, &ri);
    if (sechist_get(ri.secret_name, &v) < 0)
        return -1;
    if ((n = sechist_vals_count(v)) == 0)
        return 0;
    if ((x->cred.htok = calloc(n, sizeof(*x->cred.htok))) == NULL)
        goto out;
    if (hforms_push(x, x->cred.forms, x->cred.nforms, &cap) < 0)
        goto out;
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *val = sechist_vals_at(v, i, &len);

        if (x->cred.nforms > 0 && x->cred.forms[0].len == len &&
            secmem_equal(x->cred.forms[0].bytes, val, len))
            continue; /* the value injected now */
        if (history_add(x, val, len, &cap) < 0)
            goto out;
    }
    x->cred.forms_dynamic = true;
    rc = 0;
out:
    sechist_vals_free(&v);
    return rc;
}

/* ---- SigV4 ------------------------------------------------------------------------------ */

/* Signs the head with payload_hash at the current time, then sets the masker up. 0 or -1
 * (answered). */
static int sigv4_finish(struct exchange *x, struct http_head *h, const char *payload_hash)
{
    if (inject_sigv4(h, x->policy, x->rule, payload_hash, time(NULL), x->cred.sig) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "request signing failed", VG_R_INJECT);
        return -1;
    }
    cred_forms(x, x->cred.sig, SIGV4_HEX_LEN);
    if (cred_history(x) < 0 || exch_mask_setup(x, h, true) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        return -1;
    }
    return 0;
}

/* Interim 100 Continue to a client that waits for it before sending the body. 0 or -1. */
static int sigv4_continue(struct exchange *x)
{
    struct http_head h;
    int rc;

    httphead_init(&h);
    rc = httphead_set_status_line(&h, 1, 100, "Continue", 8) < 0 ||
                 x->ops->head(x->t, &h, EXCH_BODY_NONE, 0, false) < 0
             ? -1
             : 0;
    httphead_reset(&h);
    x->ops->flush(x->t);
    return rc;
}

/*
 * A request to a sigv4 rule's host: refused (501) when the client signs in a way vaultgate
 * cannot take over, signed at once when its body is not part of the signature (none, or
 * UNSIGNED-PAYLOAD), else buffered: 0 (go on), 1 (the body is awaited), -1 (answered).
 */
static int sigv4_apply(struct exchange *x, struct http_head *h)
{
    uint64_t len = 0;
    enum http1_body body = exch_req_body(x, &len);
    int rc;

    switch (sigv4_classify(h)) {
    case SIGV4_PRESIGNED:
        exch_fail(x, 501, VG_PS_REQUEST_ERROR,
                  "presigned URLs are not supported: vaultgate signs each request itself",
                  VG_R_SIGV4_PRESIGNED);
        return -1;
    case SIGV4_STREAMING:
        exch_fail(x, 501, VG_PS_REQUEST_ERROR,
                  "streaming signed payloads (aws-chunked, STREAMING-*) are not supported",
                  VG_R_SIGV4_STREAMING);
        return -1;
    case SIGV4_UNSIGNED_BODY:
        return sigv4_finish(x, h, SIGV4_UNSIGNED);
    case SIGV4_BUFFER:
        break;
    }
    if (body == HTTP1_BODY_NONE)
        return sigv4_finish(x, h, SIGV4_EMPTY_SHA256);
    if (body == HTTP1_BODY_LENGTH && len > VG_SIGV4_BODY_MAX) {
        exch_fail(x, 413, VG_PS_REQUEST_ERROR, "request body over 32 MiB cannot be signed",
                  VG_R_SIGV4_TOO_LARGE);
        return -1;
    }
    x->cred.sig_hash = sigv4_hash_new();
    x->cred.sig_body = evbuffer_new();
    rc = x->cred.sig_hash == NULL || x->cred.sig_body == NULL
             ? -1
             : sig_block_open(x, body == HTTP1_BODY_LENGTH ? (size_t)len : VG_SIGV4_BLOCK);
    if (rc < 0) {
        exch_fail(x, rc == -2 ? 503 : 500, VG_PS_INTERNAL_ERROR,
                  rc == -2 ? "request body buffers are full" : "out of memory",
                  rc == -2 ? VG_R_SIGV4_BUDGET : VG_R_OOM);
        return -1;
    }
    x->cred.sig_buffered = true;
    /* the body is read here, not by the upstream: answer the client's Expect ourselves */
    if (httphead_has_token(h, "Expect", "100-continue") && sigv4_continue(x) < 0) {
        exch_finish(x, EXCH_END_ABORT);
        return -1;
    }
    httphead_remove(h, "Expect");
    exch_set_req(x, EXCH_REQ_SIGN);
    x->ops->more(x->t);
    return 1;
}

int exch_cred_body(struct exchange *x, const char *data, size_t len)
{
    while (len > 0) {
        size_t n = x->cred.sig_blk_cap - x->cred.sig_blk_used;
        int rc = 0;

        if (x->cred.sig_len + len > VG_SIGV4_BODY_MAX) {
            exch_fail(x, 413, VG_PS_REQUEST_ERROR, "request body over 32 MiB cannot be signed",
                      VG_R_SIGV4_TOO_LARGE);
            return -1;
        }
        if (n == 0 && (sig_block_close(x) < 0 || (rc = sig_block_open(x, VG_SIGV4_BLOCK)) < 0)) {
            exch_fail(x, rc == -2 ? 503 : 500, VG_PS_INTERNAL_ERROR,
                      rc == -2 ? "request body buffers are full" : "out of memory",
                      rc == -2 ? VG_R_SIGV4_BUDGET : VG_R_OOM);
            return -1;
        }
        n = x->cred.sig_blk_cap - x->cred.sig_blk_used;
        if (n > len)
            n = len;
        memcpy(x->cred.sig_blk + x->cred.sig_blk_used, data, n);
        if (sigv4_hash_update(x->cred.sig_hash, data, n) < 0) {
            exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
            return -1;
        }
        x->cred.sig_blk_used += n;
        x->cred.sig_len += n;
        data += n;
        len -= n;
    }
    return 0;
}

/* The whole body is here: hashed, the head signed, the upstream asked for. 0 or -1. */
int exch_cred_body_end(struct exchange *x)
{
    char hex[SIGV4_HEX_LEN + 1];

    if (sig_block_close(x) < 0 || sigv4_hash_final(&x->cred.sig_hash, hex) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        return -1;
    }
    if (sigv4_finish(x, &x->req->head, hex) < 0)
        return -1;
    exch_get_upstream(x);
    return 0;
}

/* ---- OAuth 2.0 access tokens ----------------------------------------------------------- */

/* 502 with the Proxy-Status SPEC §3 gives while a token endpoint fails. */
static void token_failed(struct exchange *x, const char *name, const char *reason)
{
    char details[VG_SECRET_NAME_MAX + 64];

    snprintf(details, sizeof(details), "token endpoint for %s failed", name);
    exch_fail(x, 502, VG_PS_DEST_UNAVAILABLE, details, reason);
}

/* Injects the source's token if one is valid: 0 (done), 1 (wait), -1 (answered). */
static int token_try(struct exchange *x, struct http_head *h)
{
    struct oauth_tok *t = NULL;
    const char *v;
    size_t n;

    switch (oauth_acquire(x->cred.osrc, &t)) {
    case OAUTH_FAILED:
        token_failed(x, oauth_src_name(x->cred.osrc), VG_R_OAUTH_FAILED);
        return -1;
    case OAUTH_WAIT:
        return 1;
    case OAUTH_READY:
        break;
    }
    x->cred.otok = t;
    v = oauth_tok_value(t, &n);
    if ((x->cred.itok = inject_token_apply(h, x->policy, x->rule, v, n)) == NULL) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "credential injection failed", VG_R_INJECT);
        return -1;
    }
    x->cred.nforms = inject_token_forms(x->cred.itok, x->cred.forms);
    x->cred.forms_dynamic = true; /* the next token is another secret */
    if (cred_history(x) < 0 || exch_mask_setup(x, h, false) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "out of memory", VG_R_OOM);
        return -1;
    }
    return 0;
}

/* A rule whose secret is oauth2 source `src`: the token now, or the request parks on its
 * worker until the manager has one (bounded). 0, 1 (parked) or -1 (answered). */
static int oauth_apply(struct exchange *x, struct http_head *h, int src, const char *name)
{
    void **parked;
    int rc;

    if ((x->cred.osrc = policy_oauth_slot(x->policy, (size_t)src)) == NULL) {
        token_failed(x, name, VG_R_OAUTH_FAILED); /* no token manager in this process */
        return -1;
    }
    if ((rc = token_try(x, h)) != 1)
        return rc;
    if ((parked = worker_module_state(x->w, &exchange_tokens_module)) == NULL) {
        token_failed(x, name, VG_R_OAUTH_FAILED); /* no token wake-up on this worker */
        return -1;
    }
    exch_set_req(x, EXCH_REQ_TOKEN);
    park_link(x, parked);
    exch_arm(x, EXCH_T_TOKEN(x), cred_token_timeout);
    return 1;
}

/* The token manager changed a source's state: the worker's parked requests look again (the
 * module's wake hook). */
static void exchange_oauth_wake(struct worker *w)
{
    void **parked = worker_module_state(w, &exchange_tokens_module);
    void *list = parked != NULL ? *parked : NULL;

    if (list == NULL)
        return;
    /* the waiting requests move to a list of this call: those that must wait on go back, and
     * one freed meanwhile (a connection closing) unlinks itself from wherever it is */
    *parked = NULL;
    for (struct exchange *x = list; x != NULL; x = x->park_next)
        x->park_list = &list;
    while (list != NULL) {
        struct exchange *x = list;
        int rc;

        park_unlink(x);
        exch_enter(x);
        rc = token_try(x, &x->req->head);
        if (rc == 1)
            park_link(x, parked);
        else if (rc == 0)
            exch_get_upstream(x);
        exch_leave(x);
    }
}

/* The requests of a worker parked for a token: this module's state is the head of their list
 * (worker_module_state); the token manager's eventfd wakes them. */
const struct worker_module exchange_tokens_module = {
    .name = "exchange-tokens",
    .wake = exchange_oauth_wake,
};

/* The bounded wait for a token ran out (the exchange's timer). */
static void cred_token_timeout(struct exchange *x)
{
    park_unlink(x);
    token_failed(x, oauth_src_name(x->cred.osrc), VG_R_OAUTH_WAIT);
}

/* The exchange is leaving its transport: it waits for nothing any more. */
void exch_cred_detach(struct exchange *x)
{
    park_unlink(x);
}

/* ---- the entry point -------------------------------------------------------------------- */

int exch_cred_apply(struct exchange *x, struct http_head *h)
{
    struct policy_rule_info ri;

    policy_rule_info(x->policy, (size_t)x->rule, &ri);
    if (ri.per_request)
        return sigv4_apply(x, h);
    if (ri.oauth >= 0)
        return oauth_apply(x, h, ri.oauth, ri.secret_name);
    cred_forms(x, NULL, 0);
    if (inject_apply(h, x->policy, x->rule) < 0 || cred_history(x) < 0 ||
        exch_mask_setup(x, h, false) < 0) {
        exch_fail(x, 500, VG_PS_INTERNAL_ERROR, "credential injection failed", VG_R_INJECT);
        return -1;
    }
    return 0;
}
