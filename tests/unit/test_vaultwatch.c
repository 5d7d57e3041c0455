/*
 * test_vaultwatch.c - cli/vaultwatch.c: every way a vault file is replaced is reported (a
 * rewrite in place, a rename over it, the Kubernetes `..data` symlink swap, removal), another
 * file in the same directory is not, a swapped symlink's new target is watched after the
 * reload; and the debounce: one reload per window, due VAULTWATCH_DEBOUNCE_MS after the first
 * change of a burst and never sooner than that after the last reload. inotify queues an event
 * before the system call that caused it returns, so each read here is deterministic.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/vaultwatch.h"

struct fixture {
    char dir[64], path[128];
};

static void put(const char *path, const char *text)
{
    FILE *fp = fopen(path, "w");

    ck_assert_ptr_nonnull(fp);
    ck_assert_int_ge(fputs(text, fp), 0);
    ck_assert_int_eq(fclose(fp), 0);
}

static void at(char *out, size_t len, const struct fixture *f, const char *name)
{
    ck_assert_int_lt(snprintf(out, len, "%s/%s", f->dir, name), (int)len);
}

static void setup(struct fixture *f)
{
    snprintf(f->dir, sizeof(f->dir), "/tmp/vg-watch-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(f->dir));
    at(f->path, sizeof(f->path), f, "vault.json");
}

static void teardown(struct fixture *f)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", f->dir);
    ck_assert_int_eq(system(cmd), 0);
}

START_TEST(rewrite_rename_remove)
{
    struct fixture f;
    struct vaultwatch *w;
    char other[160], tmp[160], err[256];

    setup(&f);
    put(f.path, "{}");
    w = vaultwatch_open(f.path, err, sizeof(err));
    ck_assert_msg(w != NULL, "%s", err);
    ck_assert_int_eq(vaultwatch_read(w), 0); /* nothing yet */
    put(f.path, "{\"v\":1}");                /* in place */
    ck_assert_int_eq(vaultwatch_read(w), 1);
    ck_assert_int_eq(vaultwatch_read(w), 0);
    at(other, sizeof(other), &f, "notes.txt"); /* a neighbour */
    put(other, "x");
    ck_assert_int_eq(vaultwatch_read(w), 0);
    at(tmp, sizeof(tmp), &f, ".vault.json.tmp"); /* write a temporary file, rename it over */
    put(tmp, "{\"v\":2}");
    ck_assert_int_eq(vaultwatch_read(w), 0);
    ck_assert_int_eq(rename(tmp, f.path), 0);
    ck_assert_int_eq(vaultwatch_read(w), 1);
    vaultwatch_done(w, 1000); /* watches the new file */
    put(f.path, "{\"v\":3}");
    ck_assert_int_eq(vaultwatch_read(w), 1);
    ck_assert_int_eq(unlink(f.path), 0);
    ck_assert_int_eq(vaultwatch_read(w), 1);
    vaultwatch_free(&w);
    ck_assert_ptr_null(w);
    vaultwatch_free(&w);
    teardown(&f);
}
END_TEST

/* The layout of a Kubernetes Secret volume: vault.json -> ..data/vault.json, ..data -> a
 * timestamped directory; an update writes a new directory and renames ..data_tmp over ..data. */
START_TEST(kubernetes_data_swap)
{
    struct fixture f;
    struct vaultwatch *w;
    char p[160], q[160], err[256];

    setup(&f);
    at(p, sizeof(p), &f, "..2026_01_01_one");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    at(p, sizeof(p), &f, "..2026_01_01_one/vault.json");
    put(p, "{}");
    at(p, sizeof(p), &f, "..data");
    ck_assert_int_eq(symlink("..2026_01_01_one", p), 0);
    ck_assert_int_eq(symlink("..data/vault.json", f.path), 0);
    w = vaultwatch_open(f.path, err, sizeof(err));
    ck_assert_msg(w != NULL, "%s", err);
    at(p, sizeof(p), &f, "..2026_01_02_two");
    ck_assert_int_eq(mkdir(p, 0755), 0);
    at(p, sizeof(p), &f, "..2026_01_02_two/vault.json");
    put(p, "{\"v\":2}");
    ck_assert_int_eq(vaultwatch_read(w), 0); /* a new directory: not yet the vault */
    at(p, sizeof(p), &f, "..data_tmp");
    ck_assert_int_eq(symlink("..2026_01_02_two", p), 0);
    at(q, sizeof(q), &f, "..data");
    ck_assert_int_eq(rename(p, q), 0);
    ck_assert_int_eq(vaultwatch_read(w), 1);
    vaultwatch_done(w, 1000);
    /* the new target is watched: a rewrite of it (no Kubernetes does that, an operator might) */
    at(p, sizeof(p), &f, "..2026_01_02_two/vault.json");
    put(p, "{\"v\":3}");
    ck_assert_int_eq(vaultwatch_read(w), 1);
    vaultwatch_free(&w);
    teardown(&f);
}
END_TEST

START_TEST(debounce)
{
    struct fixture f;
    struct vaultwatch *w;
    char err[256];

    setup(&f);
    put(f.path, "{}");
    w = vaultwatch_open(f.path, err, sizeof(err));
    ck_assert_ptr_nonnull(w);
    ck_assert_int_eq(vaultwatch_timeout(w, 5000), -1);
    vaultwatch_changed(w, 5000);
    ck_assert_int_eq(vaultwatch_timeout(w, 5000), VAULTWATCH_DEBOUNCE_MS);
    vaultwatch_changed(w, 5150); /* the same window: not pushed back */
    ck_assert_int_eq(vaultwatch_timeout(w, 5150), 50);
    ck_assert_int_eq(vaultwatch_timeout(w, 5200), 0);
    ck_assert_int_eq(vaultwatch_timeout(w, 9999), 0);
    vaultwatch_done(w, 5201);
    ck_assert_int_eq(vaultwatch_timeout(w, 5201), -1);
    vaultwatch_changed(w, 5250); /* a new burst: its own window */
    ck_assert_int_eq(vaultwatch_timeout(w, 5250), VAULTWATCH_DEBOUNCE_MS);
    vaultwatch_free(&w);
    teardown(&f);
}
END_TEST

START_TEST(open_errors)
{
    char err[256];

    ck_assert_ptr_null(vaultwatch_open("/nonexistent-vg-dir/vault.json", err, sizeof(err)));
    ck_assert_msg(strstr(err, "cannot watch /nonexistent-vg-dir") != NULL, "%s", err);
    ck_assert_ptr_null(vaultwatch_open("/tmp/", err, sizeof(err)));
    ck_assert_msg(strstr(err, "names a directory") != NULL, "%s", err);
}
END_TEST

Suite *suite_vaultwatch(void);
Suite *suite_vaultwatch(void)
{
    Suite *s = suite_create("vaultwatch");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, rewrite_rename_remove);
    tcase_add_test(tc, kubernetes_data_swap);
    tcase_add_test(tc, debounce);
    tcase_add_test(tc, open_errors);
    suite_add_tcase(s, tc);
    return s;
}
