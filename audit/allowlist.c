/*
 * allowlist.c - `vaultgate audit suggest` (SPEC §12): the hosts a report-only run forwarded
 * (route `reported`) or any run refused, as `allow` entries for host_policy.hosts.
 *
 * Guarantees: the output names only host names, IP literals and `*.<registrable domain>`
 * wildcards that the vault validator accepts as host_policy patterns, each at most once, with
 * counts; nothing else read from the store reaches it (a row's host that is not a normalised host
 * name, such as `(no-sni)` or `(overflow)`, is listed as skipped and never becomes an entry).
 * The result depends only on the rows, min_count and the suffix list, not on row order.
 */
#include "audit/allowlist.h"
#include "common/caps.h"
#include "common/hostname.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <libpsl.h>

/* Names strictly under one registrable domain from which on they collapse to `*.<domain>`. */
#define ALLOWLIST_COLLAPSE_MIN 3

enum host_fate {
    FATE_ENTRY = 0, /* an exact entry */
    FATE_UNDER,     /* inside a `*.<domain>` entry */
    FATE_RARE,      /* seen fewer than min_count times */
    FATE_INVALID,   /* not a host name or IP literal */
    FATE_OVER,      /* past the vault's limit of entries */
};

struct seen_host {
    char host[HOSTNAME_BUFSZ];
    uint64_t reported, refused, blocked;
    uint64_t count;
    int kind;     /* enum hostname_kind, or -1 */
    int domain;   /* offset of the registrable domain in host, or -1 */
    size_t entry; /* index into the entries, for FATE_ENTRY and FATE_UNDER */
    enum host_fate fate;
};

struct entry {
    char pattern[HOSTNAME_BUFSZ + 2];
    uint64_t count;
    size_t made; /* its index before ordering */
};

struct suggest {
    struct seen_host *h;
    size_t nh;
    struct entry *e;
    size_t ne;
};

static int host_cmp(const void *a, const void *b)
{
    return strcmp(((const struct seen_host *)a)->host, ((const struct seen_host *)b)->host);
}

static uint64_t num(const cJSON *row, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(row, key);

    return cJSON_IsNumber(v) && v->valuedouble > 0 ? (uint64_t)v->valuedouble : 0;
}

/* One seen_host per distinct host of the rows, counts by route, sorted by host. 0 or -1. */
static int gather(struct suggest *s, const cJSON *seen)
{
    const cJSON *row;
    size_t n = 0, cap = (size_t)cJSON_GetArraySize(seen);

    s->h = calloc(cap > 0 ? cap : 1, sizeof(*s->h));
    if (s->h == NULL)
        return -1;
    cJSON_ArrayForEach(row, seen)
    {
        const cJSON *host = cJSON_GetObjectItemCaseSensitive(row, "host");
        const cJSON *route = cJSON_GetObjectItemCaseSensitive(row, "route");
        struct seen_host *h = &s->h[n];

        if (!cJSON_IsString(host) || !cJSON_IsString(route) ||
            strlen(host->valuestring) >= sizeof(h->host))
            continue;
        snprintf(h->host, sizeof(h->host), "%s", host->valuestring);
        if (strcmp(route->valuestring, "reported") == 0)
            h->reported = num(row, "count");
        else if (strcmp(route->valuestring, "refused") == 0)
            h->refused = num(row, "count");
        else if (strcmp(route->valuestring, "blocked") == 0)
            h->blocked = num(row, "count");
        else
            continue;
        n++;
    }
    qsort(s->h, n, sizeof(*s->h), host_cmp);
    s->nh = 0;
    for (size_t i = 0; i < n; i++) {
        struct seen_host *last = s->nh > 0 ? &s->h[s->nh - 1] : NULL;

        if (last != NULL && strcmp(last->host, s->h[i].host) == 0) {
            last->reported += s->h[i].reported;
            last->refused += s->h[i].refused;
            last->blocked += s->h[i].blocked;
        } else {
            s->h[s->nh++] = s->h[i];
        }
    }
    return 0;
}

/* Count, kind, registrable domain and the first fate of each host. */
static void classify(struct suggest *s, uint64_t min_count, const struct psl_ctx_st *psl)
{
    for (size_t i = 0; i < s->nh; i++) {
        struct seen_host *h = &s->h[i];
        char norm[HOSTNAME_BUFSZ];
        const char *dom;

        /* a refusal is counted in both tables: once */
        h->count = h->reported + (h->refused > h->blocked ? h->refused : h->blocked);
        h->kind = hostname_normalize(h->host, strlen(h->host), norm, sizeof(norm));
        h->domain = -1;
        if (h->kind < 0 || strcmp(norm, h->host) != 0) {
            h->fate = FATE_INVALID;
            continue;
        }
        h->fate = h->count < min_count ? FATE_RARE : FATE_ENTRY;
        if (h->kind != HOSTNAME_DNS || psl == NULL)
            continue;
        dom = psl_registrable_domain(psl, h->host);
        /* strictly under it: `*.<domain>` does not match the domain itself */
        if (dom != NULL && dom != h->host && dom > h->host && dom[-1] == '.')
            h->domain = (int)(dom - h->host);
    }
}

static int add_entry(struct suggest *s, const char *pattern, uint64_t count, bool wildcard)
{
    struct entry *e = &s->e[s->ne];

    snprintf(e->pattern, sizeof(e->pattern), "%s%s", wildcard ? "*." : "", pattern);
    e->count = count;
    e->made = s->ne;
    return (int)s->ne++;
}

static int domain_cmp(const void *a, const void *b)
{
    const struct seen_host *x = *(const struct seen_host *const *)a;
    const struct seen_host *y = *(const struct seen_host *const *)b;

    return strcmp(x->host + x->domain, y->host + y->domain);
}

/* Entries: one `*.<domain>` per domain with enough names under it, then the exact rest. */
static int make_entries(struct suggest *s)
{
    struct seen_host **under = calloc(s->nh + 1, sizeof(*under));
    size_t nu = 0;

    s->e = calloc(s->nh + 1, sizeof(*s->e));
    if (under == NULL || s->e == NULL) {
        free(under);
        return -1;
    }
    for (size_t i = 0; i < s->nh; i++) {
        if (s->h[i].fate == FATE_ENTRY && s->h[i].domain >= 0)
            under[nu++] = &s->h[i];
    }
    qsort(under, nu, sizeof(*under), domain_cmp);
    for (size_t i = 0, j; i < nu; i = j) {
        uint64_t sum = 0;
        int k;

        for (j = i; j < nu && domain_cmp(&under[i], &under[j]) == 0; j++)
            sum += under[j]->count;
        if (j - i < ALLOWLIST_COLLAPSE_MIN)
            continue;
        k = add_entry(s, under[i]->host + under[i]->domain, sum, true);
        for (size_t m = i; m < j; m++) {
            under[m]->fate = FATE_UNDER;
            under[m]->entry = (size_t)k;
        }
    }
    free(under);
    for (size_t i = 0; i < s->nh; i++) {
        if (s->h[i].fate == FATE_ENTRY)
            s->h[i].entry = (size_t)add_entry(s, s->h[i].host, s->h[i].count, false);
    }
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    const struct entry *x = a, *y = b;

    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return strcmp(x->pattern, y->pattern);
}

/* Most seen first; hosts follow their entry to its new place. */
static int order_entries(struct suggest *s)
{
    size_t *pos = malloc((s->ne + 1) * sizeof(*pos));
    struct entry *sorted = malloc((s->ne + 1) * sizeof(*sorted));

    if (pos == NULL || sorted == NULL) {
        free(pos);
        free(sorted);
        return -1;
    }
    memcpy(sorted, s->e, s->ne * sizeof(*sorted));
    qsort(sorted, s->ne, sizeof(*sorted), entry_cmp);
    for (size_t k = 0; k < s->ne; k++)
        pos[sorted[k].made] = k;
    for (size_t i = 0; i < s->nh; i++) {
        if (s->h[i].fate == FATE_ENTRY || s->h[i].fate == FATE_UNDER) {
            s->h[i].entry = pos[s->h[i].entry];
            if (s->h[i].entry >= VG_VAULT_MAX_HOST_ENTRIES)
                s->h[i].fate = FATE_OVER;
        }
    }
    free(s->e);
    free(pos);
    s->e = sorted;
    if (s->ne > VG_VAULT_MAX_HOST_ENTRIES)
        s->ne = VG_VAULT_MAX_HOST_ENTRIES;
    return 0;
}

static cJSON *fragment_of(const struct suggest *s)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *hp = root != NULL ? cJSON_AddObjectToObject(root, "host_policy") : NULL;
    cJSON *hosts = hp != NULL ? cJSON_AddObjectToObject(hp, "hosts") : NULL;

    for (size_t i = 0; hosts != NULL && i < s->ne; i++) {
        if (cJSON_AddStringToObject(hosts, s->e[i].pattern, "allow") == NULL)
            hosts = NULL;
    }
    if (hosts == NULL) {
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

static void print_host(FILE *f, const struct suggest *s, const struct seen_host *h)
{
    static const char *const fates[] = {"", " under ", " below --min-count", " not a host name",
                                        " over the entry limit"};
    const char *route = h->reported == 0                     ? "refused"
                        : h->refused == 0 && h->blocked == 0 ? "reported"
                                                             : "reported,refused";

    /* a host that is not a host name may hold anything: control bytes become '?' */
    for (const char *c = h->host; *c != '\0'; c++)
        fputc((unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c, f);
    fprintf(f, " %llu %s%s%s\n", (unsigned long long)h->count, route, fates[h->fate],
            h->fate == FATE_UNDER ? s->e[h->entry].pattern : "");
}

/* One line per host: those of each entry in entry order (most seen first), then the rest. */
static char *lines_of(const struct suggest *s)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL)
        return NULL;
    for (size_t e = 0; e < s->ne; e++) {
        for (size_t i = 0; i < s->nh; i++) {
            const struct seen_host *h = &s->h[i];

            if ((h->fate == FATE_ENTRY || h->fate == FATE_UNDER) && h->entry == e)
                print_host(f, s, h);
        }
    }
    for (size_t i = 0; i < s->nh; i++) {
        if (s->h[i].fate != FATE_ENTRY && s->h[i].fate != FATE_UNDER)
            print_host(f, s, &s->h[i]);
    }
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

int allowlist_suggest(const cJSON *seen, uint64_t min_count, const struct psl_ctx_st *psl,
                      cJSON **fragment, char **lines)
{
    struct suggest s = {0};
    cJSON *frag = NULL;
    char *text = NULL;
    int ret = -1;

    if (gather(&s, seen) < 0)
        goto out;
    classify(&s, min_count, psl);
    if (make_entries(&s) < 0 || order_entries(&s) < 0)
        goto out;
    frag = fragment_of(&s);
    text = lines_of(&s);
    if (frag == NULL || text == NULL)
        goto out;
    *fragment = frag;
    *lines = text;
    frag = NULL;
    text = NULL;
    ret = 0;
out:
    cJSON_Delete(frag);
    free(text);
    free(s.h);
    free(s.e);
    return ret;
}
