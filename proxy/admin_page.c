/*
 * admin_page.c - the status page (`/`) and its stylesheet (`/status.css`) of the admin API,
 * SPEC §7: one run at a glance for a person, the enforcement state in words first.
 *
 * Guarantees: the page is rendered only from the /v1/status object, the request counters and
 * this run's audit rows - never from a request - and every value in it passes html_text() (the
 * five characters that HTML gives meaning to become entities), so a host name, a run id or a
 * warning that quotes a vault string cannot add markup. No script, no inline style, no external
 * resource: the one stylesheet is same-origin, which the page's CSP (`style-src 'self'`) allows.
 * The three enforcement states use three different elements, words and colours: `enforced` is a
 * <section class="state enforced">, `nothing_to_enforce` a plain <aside class="state nothing">
 * note, `degraded` a <section class="state degraded" role="alert"> listing each warning.
 */
#include "proxy/admin_page.h"
#include "common/caps.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writing ---- */

/* Writes the first n bytes of s with &, <, >, " and ' as entities; control bytes become U+FFFD. */
static void html_text_n(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        switch (c) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&#39;", f);
            break;
        default:
            if ((c < 0x20 && c != '\t' && c != '\n') || c == 0x7f)
                fputs("&#xFFFD;", f);
            else
                fputc(c, f);
        }
    }
}

static void html_text(FILE *f, const char *s)
{
    if (s != NULL)
        html_text_n(f, s, strlen(s));
}

static const char *str_of(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) && v->valuestring != NULL ? v->valuestring : NULL;
}

static double num_of(const cJSON *obj, const char *key, double dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsNumber(v) ? v->valuedouble : dflt;
}

/* A string member of obj, escaped, or "-" when absent. */
static void field(FILE *f, const cJSON *obj, const char *key)
{
    const char *s = str_of(obj, key);

    html_text(f, s != NULL && s[0] != '\0' ? s : "-");
}

/*
 * A path or URL that wraps only after a '/': each piece up to and including a '/' is one
 * unbreakable span (no break at a '-' or anywhere inside it), with a <wbr> after it. The
 * stylesheet gives it the card's width under its label and lets a piece wider than that scroll
 * (dd.long, code.path).
 */
static void path_text(FILE *f, const char *s)
{
    if (s == NULL || s[0] == '\0') {
        html_text(f, "-");
        return;
    }
    while (*s != '\0') {
        size_t n = strcspn(s, "/");

        n += s[n] == '/';
        fputs("<span>", f);
        html_text_n(f, s, n);
        fputs(s[n - 1] == '/' ? "</span><wbr>" : "</span>", f);
        s += n;
    }
}

static void number(FILE *f, double v)
{
    fprintf(f, "%.0f", v);
}

/* ---- the enforcement state ---- */

const char *admin_enforcement(size_t nwarnings, int nothing_to_enforce)
{
    if (nwarnings > 0)
        return "degraded";
    return nothing_to_enforce ? "nothing_to_enforce" : "enforced";
}

/* One <li> per string of arr, but those starting with skip (NULL: none). */
static void string_items_but(FILE *f, const cJSON *arr, const char *skip)
{
    const cJSON *it;

    cJSON_ArrayForEach(it, arr)
    {
        if (!cJSON_IsString(it) ||
            (skip != NULL && strncmp(it->valuestring, skip, strlen(skip)) == 0))
            continue;
        fputs("<li>", f);
        html_text(f, it->valuestring);
        fputs("</li>\n", f);
    }
}

static void string_items(FILE *f, const cJSON *arr)
{
    string_items_but(f, arr, NULL);
}

/* The notes, but the one the state block already says. */
static void notes_block(FILE *f, const cJSON *notes, const char *state)
{
    const char *skip =
        state != NULL && strcmp(state, "nothing_to_enforce") == 0 ? "nothing to enforce" : NULL;
    const cJSON *it;
    size_t n = 0;

    cJSON_ArrayForEach(it, notes)
    {
        if (cJSON_IsString(it) && (skip == NULL || strncmp(it->valuestring, skip, strlen(skip))))
            n++;
    }
    if (n == 0)
        return;
    fputs("<aside class=\"notes\" aria-label=\"notes\">\n<ul id=\"notes\">\n", f);
    string_items_but(f, notes, skip);
    fputs("</ul>\n</aside>\n", f);
}

/* 1 when a warning says the vault is report-only (SPEC §12): refusals are not enforced. */
static bool report_only(const cJSON *warnings)
{
    const cJSON *it;

    cJSON_ArrayForEach(it, warnings)
    {
        if (cJSON_IsString(it) && strncmp(it->valuestring, "report-only:", 12) == 0)
            return true;
    }
    return false;
}

static void state_block(FILE *f, const cJSON *st)
{
    const char *state = str_of(st, "enforcement");
    const cJSON *warnings = cJSON_GetObjectItemCaseSensitive(st, "warnings");

    if (state != NULL && strcmp(state, "degraded") == 0) {
        fputs("<section id=\"enforcement\" class=\"state degraded\" data-state=\"degraded\" "
              "role=\"alert\" aria-labelledby=\"state-title\">\n"
              "<h2 id=\"state-title\"><span class=\"mark\" aria-hidden=\"true\">!</span> "
              "Degraded: enforcement needs attention</h2>\n",
              f);
        fputs(report_only(warnings)
                  ? "<p>The vault is report-only: what its policy would refuse is forwarded "
                    "without credentials and recorded, not refused. What the operator must act "
                    "on:</p>\n<ul id=\"warnings\">\n"
                  : "<p>Requests are still decided by the vault, but something the operator must "
                    "act on stands:</p>\n<ul id=\"warnings\">\n",
              f);
        string_items(f, warnings);
        fputs("</ul>\n</section>\n", f);
    } else if (state != NULL && strcmp(state, "nothing_to_enforce") == 0) {
        fputs("<aside id=\"enforcement\" class=\"state nothing\" data-state=\"nothing_to_enforce\" "
              "role=\"note\" aria-labelledby=\"state-title\">\n"
              "<h2 id=\"state-title\">Note: nothing to enforce</h2>\n"
              "<p>The vault has no rules, no block entries and an allow default, so vaultgate "
              "passes every request on unchanged. Nothing is wrong; there is simply no policy "
              "to apply.</p>\n</aside>\n",
              f);
    } else {
        fputs("<section id=\"enforcement\" class=\"state enforced\" data-state=\"enforced\" "
              "aria-labelledby=\"state-title\">\n"
              "<h2 id=\"state-title\"><span class=\"mark\" aria-hidden=\"true\">&#10003;</span> "
              "Enforced</h2>\n"
              "<p>Every request is decided by the vault's policy; refusals are recorded.</p>\n"
              "</section>\n",
              f);
    }
}

/* ---- sections ---- */

static void routing_section(FILE *f, const cJSON *st)
{
    const cJSON *listeners = cJSON_GetObjectItemCaseSensitive(st, "listeners");

    fputs("<section aria-labelledby=\"h-routing\">\n<h2 id=\"h-routing\">Routing</h2>\n<dl>\n"
          "<dt>Mode</dt><dd id=\"mode\">",
          f);
    field(f, st, "mode");
    fputs("</dd>\n<dt>Why</dt><dd id=\"mode-reason\">", f);
    field(f, st, "mode_reason");
    fputs("</dd>\n<dt>Rules</dt><dd id=\"rules\">", f);
    number(f, num_of(st, "rules", 0));
    fputs("</dd>\n<dt>Host entries</dt><dd id=\"host-entries\">", f);
    number(f, num_of(st, "host_entries", 0));
    fputs("</dd>\n</dl>\n<h3>Listeners</h3>\n<ul id=\"listeners\" class=\"plain\">\n", f);
    string_items(f, listeners);
    fputs("</ul>\n</section>\n", f);
}

static void traffic_section(FILE *f, const struct metrics_totals *t)
{
    static const char *const names[METRICS_D_COUNT] = {"inject", "allow", "block", "error"};
    static const char *const what[METRICS_D_COUNT] = {"credential injected", "allowed, passed on",
                                                      "refused by policy",
                                                      "protocol error, answered before a decision"};

    fputs("<section aria-labelledby=\"h-traffic\">\n<h2 id=\"h-traffic\">Requests</h2>\n"
          "<table id=\"requests\">\n<thead><tr><th scope=\"col\">decision</th>"
          "<th scope=\"col\" class=\"n\">requests</th></tr></thead>\n<tbody>\n",
          f);
    for (int d = 0; d < METRICS_D_COUNT; d++)
        fprintf(f,
                "<tr id=\"requests-%s\"><th scope=\"row\">%s <small>%s</small></th>"
                "<td class=\"n\">%llu</td></tr>\n",
                names[d], names[d], what[d], (unsigned long long)t->requests[d]);
    fprintf(f,
            "</tbody>\n</table>\n<p>Refusals by policy (requests and connections): "
            "<strong id=\"refusals\">%llu</strong></p>\n",
            (unsigned long long)t->blocked);
    /* SPEC §12: what a report-only vault let through, counted as "allow" above */
    if (t->reported > 0)
        fprintf(f,
                "<p>Would have been refused (report-only, forwarded without credential): "
                "<strong id=\"reported\">%llu</strong></p>\n",
                (unsigned long long)t->reported);
    fputs("</section>\n", f);
}

static int by_count_desc(const void *a, const void *b, const char *key)
{
    double x = num_of(*(const cJSON *const *)a, key, 0),
           y = num_of(*(const cJSON *const *)b, key, 0);
    const char *ha = str_of(*(const cJSON *const *)a, "host");
    const char *hb = str_of(*(const cJSON *const *)b, "host");

    if (x != y)
        return x < y ? 1 : -1;
    return strcmp(ha != NULL ? ha : "", hb != NULL ? hb : "");
}

static int by_seen_count(const void *a, const void *b)
{
    return by_count_desc(a, b, "seen_count");
}

static int by_count(const void *a, const void *b)
{
    return by_count_desc(a, b, "count");
}

/* The rows of arr, the largest counts first; caller frees. NULL when empty or out of memory. */
static const cJSON **sorted_rows(const cJSON *arr, int (*cmp)(const void *, const void *),
                                 size_t *n)
{
    const cJSON **v, *it;
    size_t k = 0;

    *n = (size_t)cJSON_GetArraySize(arr);
    if (*n == 0 || (v = calloc(*n, sizeof(*v))) == NULL) {
        *n = 0;
        return NULL;
    }
    cJSON_ArrayForEach(it, arr)
    {
        if (k < *n)
            v[k++] = it;
    }
    *n = k;
    qsort(v, k, sizeof(*v), cmp);
    return v;
}

struct column {
    const char *key, *title;
    bool number;
};

static void rows_table(FILE *f, const char *id, const char *title, const cJSON *arr,
                       const char *reason, const struct column *cols, size_t ncols,
                       int (*cmp)(const void *, const void *))
{
    const cJSON **rows;
    size_t n, shown;

    fprintf(f, "<section class=\"wide\" aria-labelledby=\"h-%s\">\n<h2 id=\"h-%s\">%s</h2>\n", id,
            id, title);
    if (arr == NULL) {
        fprintf(f, "<p class=\"empty\" id=\"%s-none\">", id);
        html_text(f, reason != NULL ? reason : "not available");
        fputs("</p>\n</section>\n", f);
        return;
    }
    rows = sorted_rows(arr, cmp, &n);
    if (n == 0) {
        fprintf(f, "<p class=\"empty\" id=\"%s-none\">None in this run.</p>\n</section>\n", id);
        free(rows);
        return;
    }
    fprintf(f, "<div class=\"scroll\">\n<table id=\"%s\" class=\"rows\">\n<thead><tr>", id);
    for (size_t c = 0; c < ncols; c++)
        fprintf(f, "<th scope=\"col\"%s>%s</th>", cols[c].number ? " class=\"n\"" : "",
                cols[c].title);
    fputs("</tr></thead>\n<tbody>\n", f);
    shown = n < VG_ADMIN_PAGE_MAX_ROWS ? n : VG_ADMIN_PAGE_MAX_ROWS;
    for (size_t i = 0; i < shown; i++) {
        fputs("<tr>", f);
        for (size_t c = 0; c < ncols; c++) {
            /* data-label: the column's title where a narrow screen stacks the cells */
            if (cols[c].number) {
                fprintf(f, "<td class=\"n\" data-label=\"%s\">", cols[c].title);
                number(f, num_of(rows[i], cols[c].key, 0));
            } else {
                fprintf(f, "<td class=\"%s\" data-label=\"%s\">", cols[c].key, cols[c].title);
                field(f, rows[i], cols[c].key);
            }
            fputs("</td>", f);
        }
        fputs("</tr>\n", f);
    }
    fputs("</tbody>\n</table>\n</div>\n", f);
    if (n > shown)
        fprintf(f,
                "<p class=\"more\">%zu more; all of them at <a href=\"/v1/%s\">/v1/%s</a>.</p>\n",
                n - shown, strcmp(id, "blocked") == 0 ? "blocked-hosts" : "egress-routes",
                strcmp(id, "blocked") == 0 ? "blocked-hosts" : "egress-routes");
    fputs("</section>\n", f);
    free(rows);
}

static void audit_section(FILE *f, const cJSON *st)
{
    const cJSON *au = cJSON_GetObjectItemCaseSensitive(st, "audit");
    const cJSON *healthy = cJSON_GetObjectItemCaseSensitive(au, "healthy");
    bool off = str_of(au, "store") != NULL && strcmp(str_of(au, "store"), "off") == 0;

    fputs("<section aria-labelledby=\"h-audit\">\n<h2 id=\"h-audit\">Audit store</h2>\n<dl>\n"
          "<dt>Store</dt><dd id=\"audit-store\" class=\"long\"><code class=\"path\">",
          f);
    path_text(f, str_of(au, "store"));
    fputs("</code></dd>\n<dt>Health</dt><dd id=\"audit-health\">", f);
    if (off)
        fputs("<span class=\"bad\">off: refusals are not recorded</span>", f);
    else if (cJSON_IsTrue(healthy))
        fputs("<span class=\"good\">healthy</span>", f);
    else
        fputs("<span class=\"bad\">unhealthy: counts are kept and retried</span>", f);
    fputs("</dd>\n<dt>Pending counts</dt><dd id=\"audit-pending\">", f);
    number(f, num_of(au, "pending", 0));
    fputs("</dd>\n</dl>\n</section>\n", f);
}

static void timeouts_section(FILE *f, const cJSON *st)
{
    const cJSON *to = cJSON_GetObjectItemCaseSensitive(st, "timeouts"), *it;

    fputs("<section aria-labelledby=\"h-timeouts\">\n<h2 id=\"h-timeouts\">Timeouts</h2>\n"
          "<table id=\"timeouts\">\n<thead><tr><th scope=\"col\">phase</th>"
          "<th scope=\"col\" class=\"n\">seconds</th></tr></thead>\n<tbody>\n",
          f);
    cJSON_ArrayForEach(it, to)
    {
        if (!cJSON_IsNumber(it))
            continue;
        fputs("<tr><th scope=\"row\">", f);
        html_text(f, it->string);
        fputs("</th><td class=\"n\">", f);
        number(f, it->valuedouble);
        fputs("</td></tr>\n", f);
    }
    fputs("</tbody>\n</table>\n</section>\n", f);
}

/* The SHA-256 fingerprint in colon form, which wraps at any colon on a narrow screen. */
static void ca_section(FILE *f, const cJSON *st)
{
    const char *fp = str_of(st, "ca_sha256");

    fputs("<section class=\"wide\" aria-labelledby=\"h-ca\">\n<h2 id=\"h-ca\">Run</h2>\n<dl>\n"
          "<dt>CA fingerprint (SHA-256)</dt><dd id=\"ca-sha256\" class=\"fp\">",
          f);
    for (size_t i = 0; fp != NULL && fp[i] != '\0'; i++) {
        if (i > 0 && i % 2 == 0)
            fputs(":<wbr>", f);
        html_text(f, (char[]){fp[i], '\0'});
    }
    if (fp == NULL)
        fputs("-", f);
    fputs("</dd>\n<dt>Started</dt><dd id=\"started-at\">", f);
    field(f, st, "started_at");
    fputs("</dd>\n<dt>vaultgate</dt><dd id=\"version\">", f);
    field(f, st, "version");
    fputs("</dd>\n</dl>\n</section>\n", f);
}

static const struct column blocked_cols[] = {
    {"host", "host", false},
    {"seen_count", "count", true},
    {"first_seen", "first seen", false},
    {"last_seen", "last seen", false},
    {"source", "source", false},
};

static const struct column route_cols[] = {
    {"host", "host", false},
    {"route", "route", false},
    {"count", "count", true},
};

char *admin_page_render(const struct admin_page_input *in, size_t *len)
{
    const cJSON *st = in->status, *run = cJSON_GetObjectItemCaseSensitive(st, "run");
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(st, "notes");
    const char *state = str_of(st, "enforcement");
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);

    if (f == NULL)
        return NULL;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "<meta http-equiv=\"refresh\" content=\"5\">\n<title>",
          f);
    html_text(f, state == NULL                              ? "status"
                 : strcmp(state, "degraded") == 0           ? "DEGRADED"
                 : strcmp(state, "nothing_to_enforce") == 0 ? "nothing to enforce"
                                                            : "enforced");
    fputs(" - ", f);
    field(f, run, "id");
    fputs(" - vaultgate</title>\n<link rel=\"stylesheet\" href=\"/status.css\">\n</head>\n"
          "<body>\n<header>\n<h1>vaultgate</h1>\n<p class=\"run\">run <strong id=\"run-id\">",
          f);
    field(f, run, "id");
    fputs("</strong> <span class=\"sep\">&middot;</span> user <strong id=\"run-user\">", f);
    field(f, run, "user");
    fputs("</strong></p>\n</header>\n<main>\n", f);
    state_block(f, st);
    notes_block(f, notes, state);
    routing_section(f, st);
    traffic_section(f, &in->totals);
    audit_section(f, st);
    rows_table(f, "blocked", "Blocked hosts", in->blocked, in->rows_reason, blocked_cols,
               sizeof(blocked_cols) / sizeof(blocked_cols[0]), by_seen_count);
    rows_table(f, "routes", "Egress routes", in->routes, in->rows_reason, route_cols,
               sizeof(route_cols) / sizeof(route_cols[0]), by_count);
    timeouts_section(f, st);
    ca_section(f, st);
    fputs("</main>\n<footer>\n<p>Refreshes every 5 s. Machine-readable: "
          "<a href=\"/v1/status\">/v1/status</a>, <a href=\"/v1/blocked-hosts\">/v1/blocked-hosts"
          "</a>, <a href=\"/v1/egress-routes\">/v1/egress-routes</a>, <a href=\"/metrics\">"
          "/metrics</a>, <a href=\"/ca.pem\">/ca.pem</a>.</p>\n</footer>\n</body>\n</html>\n",
          f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    if (len != NULL)
        *len = n;
    return buf;
}

/* ---- the stylesheet ---- */

static const char css[] =
    ":root{color-scheme:light;--fg:#1b1f24;--muted:#57606a;--line:#d0d7de;--bg:#f6f8fa;"
    "--ok:#116329;--ok-bg:#dafbe1;--bad:#a40e26;--bad-bg:#ffebe9;--note:#0a3069;"
    "--note-bg:#ddf4ff}\n"
    "*{box-sizing:border-box}\n"
    "body{margin:0;font:16px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,'DejaVu Sans',"
    "sans-serif;color:var(--fg);background:#fff}\n"
    "header,main,footer{max-width:64rem;margin:0 auto;padding:0 1rem}\n"
    "header{display:flex;flex-wrap:wrap;align-items:baseline;gap:.25rem 1rem;padding-top:1rem;"
    "border-bottom:1px solid var(--line)}\n"
    "h1{font-size:1.4rem;margin:0 0 .5rem}\n"
    ".run{margin:0 0 .5rem;color:var(--muted);overflow-wrap:anywhere}\n"
    ".run strong{color:var(--fg)}\n"
    "h2{font-size:1.15rem;margin:0 0 .5rem}\n"
    "h3{font-size:1rem;margin:1rem 0 .25rem}\n"
    "main{display:grid;grid-template-columns:repeat(auto-fit,minmax(18rem,1fr));gap:1rem;"
    "align-items:start;padding-top:1rem;padding-bottom:1rem}\n"
    "main>section,main>aside{border:1px solid var(--line);border-radius:6px;padding:.75rem 1rem;"
    "min-width:0}\n"
    ".state,.notes,.wide{grid-column:1/-1}\n"
    ".state h2{font-size:1.4rem}\n"
    ".state p{margin:.25rem 0}\n"
    ".mark{display:inline-block;width:1.6rem;height:1.6rem;line-height:1.6rem;text-align:center;"
    "border-radius:50%;color:#fff;font-weight:700;margin-right:.25rem}\n"
    ".enforced{background:var(--ok-bg);border:2px solid var(--ok)}\n"
    ".enforced h2{color:var(--ok)}\n"
    ".enforced .mark{background:var(--ok)}\n"
    ".degraded{background:var(--bad-bg);border:3px solid var(--bad);border-left-width:.75rem}\n"
    ".degraded h2{color:var(--bad);text-transform:none}\n"
    ".degraded .mark{background:var(--bad)}\n"
    ".degraded ul{margin:.5rem 0 0;padding-left:1.25rem;font-weight:600}\n"
    ".degraded li{margin:.25rem 0;overflow-wrap:anywhere}\n"
    ".nothing{background:var(--note-bg);border:1px dashed var(--note);color:var(--note);"
    "font-style:italic}\n"
    ".nothing h2{font-style:normal;font-weight:600}\n"
    ".notes{background:var(--bg);color:var(--muted);padding:.25rem 1rem}\n"
    ".notes ul{margin:.25rem 0;padding-left:1.25rem}\n"
    "dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem .75rem;margin:0}\n"
    "dt{color:var(--muted)}\n"
    "dd{margin:0;overflow-wrap:anywhere;min-width:0}\n"
    ".fp{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.85rem}\n"
    "code{font-family:ui-monospace,'DejaVu Sans Mono',monospace;font-size:.9rem;"
    "overflow-wrap:anywhere}\n"
    "ul.plain{list-style:none;margin:0;padding:0;font-family:ui-monospace,'DejaVu Sans Mono',"
    "monospace;font-size:.9rem}\n"
    ".scroll{overflow-x:auto}\n"
    /* a path wraps after a '/' only (admin_page.c path_text), never inside a piece */
    "dl dd.long{grid-column:1/-1;overflow-x:auto;margin-bottom:.25rem}\n"
    "code.path{overflow-wrap:normal;word-break:normal}\n"
    "code.path span{white-space:nowrap}\n"
    "table{border-collapse:collapse;width:100%;font-size:.95rem}\n"
    "th,td{text-align:left;padding:.3rem .5rem .3rem 0;border-bottom:1px solid var(--line);"
    "vertical-align:top}\n"
    "td.host{overflow-wrap:anywhere;word-break:break-word}\n"
    "td.first_seen,td.last_seen{font-size:.8rem;white-space:nowrap}\n"
    "th small{display:block;font-weight:400;color:var(--muted)}\n"
    ".n{text-align:right;font-variant-numeric:tabular-nums}\n"
    ".good{color:var(--ok);font-weight:600}\n"
    ".bad{color:var(--bad);font-weight:600}\n"
    ".empty,.more{color:var(--muted);margin:.25rem 0}\n"
    "footer{color:var(--muted);font-size:.85rem;border-top:1px solid var(--line);"
    "padding-bottom:1rem}\n"
    "a{color:#0550ae}\n"
    "@media (max-width:30rem){body{font-size:15px}header,main,footer{padding:0 .5rem}"
    "main{gap:.75rem;padding-top:.75rem}main>section,main>aside{padding:.5rem .75rem}"
    "dl{grid-template-columns:1fr}dt{margin-top:.25rem}"
    "table.rows thead{display:none}table.rows tr{display:block;padding:.4rem 0;"
    "border-bottom:1px solid var(--line)}table.rows td{display:flex;gap:.5rem;border:0;"
    "padding:.05rem 0;text-align:left;white-space:normal}"
    "table.rows td::before{content:attr(data-label);flex:0 0 5.5rem;color:var(--muted)}"
    "table.rows td.host{font-weight:600}}\n";

const char *admin_page_css(size_t *len)
{
    *len = sizeof(css) - 1;
    return css;
}
