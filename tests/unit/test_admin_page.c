/*
 * test_admin_page.c - the status page renderer (proxy/admin_page.c): the enforcement state
 * from warnings and the vault, every value HTML-escaped (the five characters HTML gives meaning
 * to, and control bytes), the state's element and words, the row cap, and the audit store's
 * path in pieces that wrap only after a '/'.
 * Chromium renders the page in tests/integration/cases/test_status_page.py.
 */
#include "proxy/admin_page.h"
#include "common/caps.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *render(cJSON *st, cJSON *blocked, size_t *len)
{
    struct admin_page_input in;
    char *html;

    memset(&in, 0, sizeof(in));
    in.status = st;
    in.blocked = blocked;
    in.routes = blocked != NULL ? cJSON_CreateArray() : NULL;
    in.rows_reason = blocked != NULL ? NULL : "The audit store is off.";
    in.totals.requests[METRICS_D_BLOCK] = 7;
    html = admin_page_render(&in, len);
    cJSON_Delete((cJSON *)in.routes);
    ck_assert_ptr_nonnull(html);
    ck_assert_uint_eq(strlen(html), *len);
    return html;
}

static cJSON *status(const char *state, const char *warning)
{
    cJSON *st = cJSON_CreateObject(), *run = cJSON_AddObjectToObject(st, "run");
    cJSON *w = cJSON_AddArrayToObject(st, "warnings");

    cJSON_AddStringToObject(run, "id", "run-<1>");
    cJSON_AddStringToObject(run, "user", "u&'\"x");
    cJSON_AddStringToObject(st, "enforcement", state);
    cJSON_AddStringToObject(st, "mode_reason",
                            "a\x01"
                            "b");
    if (warning != NULL)
        cJSON_AddItemToArray(w, cJSON_CreateString(warning));
    return st;
}

START_TEST(enforcement_state)
{
    ck_assert_str_eq(admin_enforcement(0, 0), "enforced");
    ck_assert_str_eq(admin_enforcement(0, 1), "nothing_to_enforce");
    /* a warning outranks the note: it asks the operator to act */
    ck_assert_str_eq(admin_enforcement(1, 1), "degraded");
    ck_assert_str_eq(admin_enforcement(3, 0), "degraded");
}
END_TEST

START_TEST(escaped_and_states)
{
    size_t len;
    cJSON *st = status("degraded", "reload failed: [\"<script>alert(1)</script>\"]");
    char *html = render(st, NULL, &len);

    ck_assert_ptr_null(strstr(html, "<script"));
    ck_assert_ptr_nonnull(strstr(html, "&lt;script&gt;alert(1)&lt;/script&gt;"));
    ck_assert_ptr_nonnull(strstr(html, "run-&lt;1&gt;"));
    ck_assert_ptr_nonnull(strstr(html, "u&amp;&#39;&quot;x"));
    ck_assert_ptr_nonnull(strstr(html, "a&#xFFFD;b"));
    ck_assert_ptr_nonnull(strstr(html, "role=\"alert\""));
    ck_assert_ptr_nonnull(strstr(html, "<meta http-equiv=\"refresh\" content=\"5\">"));
    ck_assert_ptr_nonnull(strstr(html, "The audit store is off."));
    free(html);
    cJSON_Delete(st);

    st = status("nothing_to_enforce", NULL);
    html = render(st, NULL, &len);
    ck_assert_ptr_nonnull(strstr(html, "<aside id=\"enforcement\" class=\"state nothing\""));
    ck_assert_ptr_null(strstr(html, "role=\"alert\""));
    ck_assert_ptr_null(strstr(html, "id=\"warnings\""));
    free(html);
    cJSON_Delete(st);

    st = status("enforced", NULL);
    html = render(st, NULL, &len);
    ck_assert_ptr_nonnull(strstr(html, "<section id=\"enforcement\" class=\"state enforced\""));
    ck_assert_ptr_nonnull(strstr(html, "<tr id=\"requests-block\">"));
    free(html);
    cJSON_Delete(st);
}
END_TEST

START_TEST(store_path_pieces)
{
    static const struct {
        const char *store, *html;
    } cases[] = {
        {"sqlite:/var/lib/vaultgate/audit.db",
         "<dd id=\"audit-store\" class=\"long\"><code class=\"path\"><span>sqlite:/</span><wbr>"
         "<span>var/</span><wbr><span>lib/</span><wbr><span>vaultgate/</span><wbr>"
         "<span>audit.db</span></code></dd>"},
        {"sqlite:./var/a-b_c.db", "<code class=\"path\"><span>sqlite:./</span><wbr><span>var/"
                                  "</span><wbr><span>a-b_c.db</span></code>"},
        {"postgresql://u@h/<db>&", "<span>postgresql:/</span><wbr><span>/</span><wbr>"
                                   "<span>u@h/</span><wbr><span>&lt;db&gt;&amp;</span></code>"},
        {"/trailing/", "<span>/</span><wbr><span>trailing/</span><wbr></code>"},
        {"off", "<code class=\"path\"><span>off</span></code>"},
        {"", "<code class=\"path\">-</code>"},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cJSON *st = status("enforced", NULL);
        cJSON *au = cJSON_AddObjectToObject(st, "audit");
        size_t len;
        char *html;

        cJSON_AddStringToObject(au, "store", cases[i].store);
        html = render(st, NULL, &len);
        ck_assert_msg(strstr(html, cases[i].html) != NULL, "'%s': no %s", cases[i].store,
                      cases[i].html);
        free(html);
        cJSON_Delete(st);
    }
}
END_TEST

START_TEST(row_cap)
{
    cJSON *st = status("enforced", NULL), *rows = cJSON_CreateArray();
    size_t len, trs = 0;
    char host[64], *html, *p;

    for (int i = 0; i <= VG_ADMIN_PAGE_MAX_ROWS; i++) {
        cJSON *r = cJSON_CreateObject();

        snprintf(host, sizeof(host), "h%03d.<b>.example", i);
        cJSON_AddStringToObject(r, "host", host);
        cJSON_AddNumberToObject(r, "seen_count", i);
        cJSON_AddItemToArray(rows, r);
    }
    html = render(st, rows, &len);
    for (p = strstr(html, "<td class=\"host\" "); p != NULL;
         p = strstr(p + 1, "<td class=\"host\" "))
        trs++;
    ck_assert_uint_eq(trs, VG_ADMIN_PAGE_MAX_ROWS);
    /* the largest counts first: the row with count 0 is the one left out */
    ck_assert_ptr_nonnull(strstr(html, "h100.&lt;b&gt;.example"));
    ck_assert_ptr_null(strstr(html, "h000."));
    ck_assert_ptr_nonnull(strstr(html, "1 more; all of them at <a href=\"/v1/blocked-hosts\">"));
    free(html);
    cJSON_Delete(rows);
    cJSON_Delete(st);
}
END_TEST

Suite *suite_admin_page(void);
Suite *suite_admin_page(void)
{
    Suite *s = suite_create("admin_page");
    TCase *tc = tcase_create("page");

    tcase_add_test(tc, enforcement_state);
    tcase_add_test(tc, escaped_and_states);
    tcase_add_test(tc, row_cap);
    tcase_add_test(tc, store_path_pieces);
    suite_add_tcase(s, tc);
    return s;
}
