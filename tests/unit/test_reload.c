/*
 * test_reload.c - SIGHUP's reload (cli/reload.c) without a running gateway: a valid vault is
 * swapped in, an invalid one keeps the old snapshot; the status warnings of the last reload
 * (vault error, "relaunch required" for another routing mode or a name outside the CA's
 * constraints, a vault file readable by others) replace those of the one before, while the
 * lasting ones stay first; at most RELOAD_MAX_WARNINGS of each kind.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ca/ca.h"
#include "cli/reload.h"
#include "policy/policy.h"

#define V_RULE(host) "{\"host_pattern\":\"" host "\",\"secret\":\"K\",\"scheme\":\"bearer\"}"
#define V_HEAD       "{\"version\":1,\"secrets\":{\"K\":{\"value\":\"abcdefgh\"}},\"rules\":["

static const char vault_a[] = V_HEAD V_RULE("a.example.test") "]}";
static const char vault_ab[] = V_HEAD V_RULE("a.example.test") "," V_RULE("b.example.test") "]}";
static const char vault_catchall[] =
    V_HEAD V_RULE("a.example.test") "],\"host_policy\":{\"default\":\"block\"}}";

struct fixture {
    char dir[64], path[96];
    struct worker_shared sh;
    struct reload_warnings w;
};

static void write_vault(struct fixture *f, const char *text, mode_t mode)
{
    FILE *fp = fopen(f->path, "w");

    ck_assert_ptr_nonnull(fp);
    ck_assert_int_eq(fputs(text, fp) >= 0, 1);
    ck_assert_int_eq(fclose(fp), 0);
    ck_assert_int_eq(chmod(f->path, mode), 0);
}

/* A run started with vault_a: default routing, the CA constrained to a.example.test. */
static void setup(struct fixture *f)
{
    static const char *const dns[] = {"a.example.test"};
    struct ca_names names = {.constrained = true, .dns = dns, .ndns = 1};
    char err[512];

    memset(f, 0, sizeof(*f));
    snprintf(f->dir, sizeof(f->dir), "/tmp/vg-reload-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    snprintf(f->path, sizeof(f->path), "%s/vault.json", f->dir);
    write_vault(f, vault_a, 0600);
    pthread_mutex_init(&f->sh.policy_lock, NULL);
    f->sh.policy = policy_load(f->path, err, sizeof(err));
    ck_assert_msg(f->sh.policy != NULL, "%s", err);
    f->sh.mode = policy_mode(f->sh.policy, NULL);
    ck_assert_int_eq(f->sh.mode, POLICY_MODE_DEFAULT);
    f->sh.ca = ca_new("run-reload", &names, err, sizeof(err));
    ck_assert_msg(f->sh.ca != NULL, "%s", err);
    reload_warnings_init(&f->w);
}

static void teardown(struct fixture *f)
{
    reload_warnings_free(&f->w);
    policy_unref(&f->sh.policy);
    ca_free(&f->sh.ca);
    unlink(f->path);
    rmdir(f->dir);
}

/* The warnings as /v1/status lists them, joined with '\n' into buf. Returns how many. */
static int warnings(struct fixture *f, char *buf, size_t len)
{
    cJSON *arr = cJSON_CreateArray(), *it;
    size_t off = 0;
    int n = 0;

    buf[0] = '\0';
    reload_warnings_json(&f->w, arr);
    cJSON_ArrayForEach(it, arr)
    {
        off += (size_t)snprintf(buf + off, len - off, "%s\n", it->valuestring);
        ck_assert_uint_lt(off, len);
        n++;
    }
    cJSON_Delete(arr);
    return n;
}

static enum metrics_reload reload(struct fixture *f, const char *text, mode_t mode)
{
    write_vault(f, text, mode);
    return reload_vault(&f->w, f->path, &f->sh, NULL);
}

START_TEST(valid_vault_swapped_in)
{
    struct fixture f;
    struct policy *before;
    char buf[2048];

    setup(&f);
    before = f.sh.policy;
    ck_assert_int_eq(reload(&f, vault_a, 0600), METRICS_R_OK);
    ck_assert_ptr_ne(f.sh.policy, before);
    ck_assert_uint_eq(atomic_load(&f.sh.policy_gen), 1);
    ck_assert_int_eq(warnings(&f, buf, sizeof(buf)), 0);
    /* a name outside the constrained CA: swapped in, and the first such name is named */
    ck_assert_int_eq(reload(&f, vault_ab, 0600), METRICS_R_RELAUNCH);
    ck_assert_uint_eq(policy_rule_count(f.sh.policy), 2);
    ck_assert_int_eq(warnings(&f, buf, sizeof(buf)), 1);
    ck_assert_str_eq(buf, "relaunch required: b.example.test is outside the CA's name "
                          "constraints\n");
    teardown(&f);
}
END_TEST

START_TEST(invalid_vault_keeps_policy)
{
    struct fixture f;
    struct policy *before;
    char buf[2048];

    setup(&f);
    before = f.sh.policy;
    ck_assert_int_eq(reload(&f, "{ not json", 0600), METRICS_R_INVALID);
    ck_assert_ptr_eq(f.sh.policy, before);
    ck_assert_uint_eq(atomic_load(&f.sh.policy_gen), 0);
    ck_assert_int_eq(warnings(&f, buf, sizeof(buf)), 1);
    ck_assert_msg(strncmp(buf, "vault reload failed, the previous policy stays: ", 48) == 0, "%s",
                  buf);
    teardown(&f);
}
END_TEST

START_TEST(each_reload_replaces_the_last)
{
    struct fixture f;
    char buf[2048];

    setup(&f);
    reload_warn(&f.w, true, "audit is off: refusals are not recorded");
    reload(&f, vault_catchall, 0600);
    ck_assert_int_eq(warnings(&f, buf, sizeof(buf)), 2);
    ck_assert_msg(strstr(buf, "audit is off: refusals are not recorded\n"
                              "relaunch required: the vault needs catch-all routing (") == buf,
                  "%s", buf);
    /* readable by others: warned, the relaunch warning of the reload before is gone */
    reload(&f, vault_a, 0644);
    ck_assert_int_eq(warnings(&f, buf, sizeof(buf)), 2);
    ck_assert_str_eq(buf, "audit is off: refusals are not recorded\n"
                          "the vault file is readable by group or others (mode 0644): make it "
                          "0600\n");
    reload(&f, vault_a, 0600);
    ck_assert_int_eq(warnings(&f, buf, sizeof(buf)), 1);
    teardown(&f);
}
END_TEST

START_TEST(warnings_bounded)
{
    struct reload_warnings w;
    cJSON *arr = cJSON_CreateArray();

    reload_warnings_init(&w);
    for (int i = 0; i < RELOAD_MAX_WARNINGS + 5; i++) {
        reload_warn(&w, true, "lasting %d", i);
        reload_warn(&w, false, "last %d", i);
    }
    reload_warnings_json(&w, arr);
    ck_assert_int_eq(cJSON_GetArraySize(arr), 2 * RELOAD_MAX_WARNINGS);
    ck_assert_str_eq(cJSON_GetArrayItem(arr, 0)->valuestring, "lasting 0");
    ck_assert_str_eq(cJSON_GetArrayItem(arr, RELOAD_MAX_WARNINGS)->valuestring, "last 0");
    cJSON_Delete(arr);
    reload_warnings_free(&w);
}
END_TEST

Suite *suite_reload(void);

Suite *suite_reload(void)
{
    Suite *s = suite_create("reload");
    TCase *tc = tcase_create("reload");

    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, valid_vault_swapped_in);
    tcase_add_test(tc, invalid_vault_keeps_policy);
    tcase_add_test(tc, each_reload_replaces_the_last);
    tcase_add_test(tc, warnings_bounded);
    suite_add_tcase(s, tc);
    return s;
}
