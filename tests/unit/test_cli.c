/*
 * test_cli.c - the option parser every subcommand shares (cli/cli.c): each kind of value, the
 * grammar (`--x v`, `--x=v`, flags, operands, help), and the exact one-line usage error of each
 * mistake in the standard wording and in a command's own words; the redactor on what is echoed;
 * a refused value leaves its field alone.
 */
#include <check.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

struct t_opts {
    const char *name, *opt;
    struct cli_list list;
    bool flag;
    int n;
    double secs;
    int level;
    const char *set;
    int operands;
};

static int usage_calls;

static void t_usage(FILE *out)
{
    usage_calls++;
}

/* Takes anything but "bad"; a command's own error wording. */
static int t_set(void *arg, const char *v)
{
    struct t_opts *o = arg;

    if (strcmp(v, "bad") == 0)
        return cli_usage_error("t", "--set: not '%s'", v);
    o->set = v;
    return 0;
}

/* Takes "one" once. */
static int t_operand(void *arg, const char *word)
{
    struct t_opts *o = arg;

    if (strcmp(word, "one") != 0 || o->operands > 0)
        return -1;
    o->operands++;
    return 0;
}

#define T_OPT(field) offsetof(struct t_opts, field)

static const char *const t_levels[] = {"a", "bb", "ccc", NULL};

static const struct cli_opt t_table[] = {
    {"--name", CLI_STR, .flags = CLI_ONCE | CLI_NONEMPTY, .off = T_OPT(name)},
    {"--opt", CLI_STR, .off = T_OPT(opt), .what = "a FILE"},
    {"--list", CLI_LIST, .off = T_OPT(list)},
    {"--flag", CLI_FLAG, .off = T_OPT(flag)},
    {"--n", CLI_INT, .flags = CLI_ONCE, .off = T_OPT(n), .lo = 1, .hi = 10},
    {"--secs", CLI_SECONDS, .off = T_OPT(secs), .lo = 0, .hi = 5},
    {"--level", CLI_ENUM, .off = T_OPT(level), .choices = t_levels},
    {"--set", CLI_SET, .set = t_set},
    {0},
};

static const struct cli_spec t_standard = {"t", t_table, NULL, NULL, NULL};

static const struct cli_words t_words = {.unknown = "unknown argument",
                                         .stray = "stray word",
                                         .needs = "option ",
                                         .repeated = "given twice",
                                         .whole = true,
                                         .empty_needs = true};
static const struct cli_spec t_own = {"t", t_table, t_usage, t_operand, &t_words};

/* Runs cli_parse on words (NULL-terminated) with stderr captured into err. Returns its result. */
static int parse(const struct cli_spec *spec, const char *const *words, struct t_opts *o, int *rc,
                 char *err, size_t errlen)
{
    char *argv[2 * CLI_LIST_MAX + 8] = {"t"};
    int argc = 1, r, saved;
    FILE *tmp = tmpfile();
    size_t n;

    ck_assert_ptr_nonnull(tmp);
    for (; words[argc - 1] != NULL; argc++)
        argv[argc] = (char *)words[argc - 1];
    memset(o, 0, sizeof(*o));
    o->level = -1;
    *rc = -1;
    fflush(stderr);
    saved = dup(STDERR_FILENO);
    dup2(fileno(tmp), STDERR_FILENO);
    r = cli_parse(spec, argc, argv, o, rc);
    fflush(stderr);
    dup2(saved, STDERR_FILENO);
    close(saved);
    rewind(tmp);
    n = fread(err, 1, errlen - 1, tmp);
    err[n] = '\0';
    fclose(tmp);
    return r;
}

struct error_case {
    const struct cli_spec *spec;
    const char *words[4];
    const char *msg; /* between "vaultgate t: " and " (see: ...)" */
};

static const struct error_case errors[] = {
    /* the standard wording (run's) */
    {&t_standard, {"--name", "a", "--name", "b"}, "--name given more than once"},
    {&t_standard, {"--name="}, "--name: empty value"},
    {&t_standard, {"--name"}, "--name needs a value"},
    {&t_standard, {"--opt"}, "--opt needs a FILE"},
    {&t_standard, {"--bogus=hidden"}, "unknown option '--bogus'"},
    {&t_standard, {"--help"}, "unknown option '--help'"},
    {&t_standard, {"-x"}, "unexpected argument '-x'"},
    {&t_standard, {"-"}, "unexpected argument '-'"},
    {&t_standard, {"word"}, "unexpected argument 'word'"},
    {&t_standard, {"--flag=1"}, "--flag takes no value"},
    {&t_standard, {"--n", "0"}, "--n: expected a number from 1 to 10, got '0'"},
    {&t_standard, {"--n", "2.5"}, "--n: expected an integer, got '2.5'"},
    {&t_standard, {"--n=3", "--n=4"}, "--n given more than once"},
    {&t_standard, {"--secs", "x"}, "--secs: expected a number from 0 to 5, got 'x'"},
    {&t_standard, {"--secs", ""}, "--secs: expected a number from 0 to 5, got ''"},
    {&t_standard, {"--level", "d"}, "--level: expected a, bb or ccc, got 'd'"},
    {&t_standard, {"--set", "bad"}, "--set: not 'bad'"},
    /* a command's own words */
    {&t_own, {"--name", "a", "--name", "b"}, "--name given twice"},
    {&t_own, {"--name="}, "option --name needs a value"},
    {&t_own, {"--opt"}, "option --opt needs a FILE"},
    {&t_own, {"--bogus=v"}, "unknown argument '--bogus=v'"},
    {&t_own, {"-x"}, "unknown argument '-x'"},
    {&t_own, {"-"}, "stray word '-'"},
    {&t_own, {"--flag=1"}, "unknown argument '--flag=1'; did you mean --flag?"},
    {&t_standard, {"--nmae=x"}, "unknown option '--nmae'; did you mean --name?"},
    {&t_standard, {"--FLAG"}, "unknown option '--FLAG'; did you mean --flag?"},
    {&t_standard, {"--zzzzzz"}, "unknown option '--zzzzzz'"},
    {&t_own, {"two"}, "stray word 'two'"},
    {&t_own, {"one", "one"}, "stray word 'one'"},
    /* what is echoed passes the redactor */
    {&t_standard, {"sk-live-0123456789"}, "unexpected argument '******************'"},
    {&t_own, {"--x=ghp_abcdef12"}, "unknown argument '****************'"},
};

START_TEST(usage_errors)
{
    const struct error_case *c = &errors[_i];
    struct t_opts o;
    char err[1024], want[1024];
    int rc;

    ck_assert_int_eq(parse(c->spec, c->words, &o, &rc, err, sizeof(err)), -1);
    ck_assert_int_eq(rc, EXIT_USAGE);
    snprintf(want, sizeof(want), "vaultgate t: %s (see: vaultgate t --help)\n", c->msg);
    ck_assert_str_eq(err, want);
}
END_TEST

START_TEST(every_kind)
{
    const char *words[] = {"--name", "x",     "--opt=y", "--list", "a",     "--list=b",
                           "--flag", "--n",   "3",       "--secs", "0.5",   "--level",
                           "ccc",    "--set", "ok",      "--list", "--n=4", NULL};
    struct t_opts o;
    char err[256];
    int rc;

    ck_assert_int_eq(parse(&t_standard, words, &o, &rc, err, sizeof(err)), 0);
    ck_assert_str_eq(err, "");
    ck_assert_str_eq(o.name, "x");
    ck_assert_str_eq(o.opt, "y");
    ck_assert_uint_eq(o.list.n, 3);
    ck_assert_str_eq(o.list.v[0], "a");
    ck_assert_str_eq(o.list.v[1], "b");
    ck_assert_str_eq(o.list.v[2], "--n=4"); /* a value is the next word, whatever it is */
    ck_assert(o.flag);
    ck_assert_int_eq(o.n, 3);
    ck_assert(o.secs == 0.5);
    ck_assert_int_eq(o.level, 2);
    ck_assert_str_eq(o.set, "ok");
}
END_TEST

START_TEST(last_wins_and_refused_values)
{
    const char *twice[] = {"--opt", "a", "--opt=b", "--flag", "--flag", NULL};
    const char *bad_level[] = {"--level", "zz", NULL};
    const char *bad_n[] = {"--n", "11", NULL};
    struct t_opts o;
    char err[256];
    int rc;

    ck_assert_int_eq(parse(&t_standard, twice, &o, &rc, err, sizeof(err)), 0);
    ck_assert_str_eq(o.opt, "b");
    ck_assert(o.flag);
    ck_assert_int_eq(parse(&t_standard, bad_level, &o, &rc, err, sizeof(err)), -1);
    ck_assert_int_eq(o.level, -1);
    ck_assert_int_eq(parse(&t_standard, bad_n, &o, &rc, err, sizeof(err)), -1);
    ck_assert_int_eq(o.n, 0);
}
END_TEST

START_TEST(list_cap)
{
    const char *words[2 * CLI_LIST_MAX + 3];
    struct t_opts o;
    char err[256];
    int rc;

    for (int i = 0; i < CLI_LIST_MAX; i++) {
        words[2 * i] = "--list";
        words[2 * i + 1] = "v";
    }
    words[2 * CLI_LIST_MAX] = NULL;
    ck_assert_int_eq(parse(&t_standard, words, &o, &rc, err, sizeof(err)), 0);
    ck_assert_uint_eq(o.list.n, CLI_LIST_MAX);
    words[2 * CLI_LIST_MAX] = "--list=w";
    words[2 * CLI_LIST_MAX + 1] = NULL;
    ck_assert_int_eq(parse(&t_standard, words, &o, &rc, err, sizeof(err)), -1);
    ck_assert_int_eq(rc, EXIT_USAGE);
    ck_assert_str_eq(err, "vaultgate t: --list: more than 64 values (see: vaultgate t --help)\n");
}
END_TEST

START_TEST(help_and_operands)
{
    const char *help_late[] = {"one", "--flag", "-h", "--bogus", NULL};
    const char *error_first[] = {"--bogus", "--help", NULL};
    const char *operand[] = {"one", "--flag", NULL};
    struct t_opts o;
    char err[256];
    int rc;

    usage_calls = 0;
    ck_assert_int_eq(parse(&t_own, help_late, &o, &rc, err, sizeof(err)), -1);
    ck_assert_int_eq(rc, EXIT_OK);
    ck_assert_int_eq(usage_calls, 1);
    ck_assert_str_eq(err, "");
    ck_assert_int_eq(parse(&t_own, error_first, &o, &rc, err, sizeof(err)), -1);
    ck_assert_int_eq(rc, EXIT_USAGE);
    ck_assert_int_eq(usage_calls, 1);
    ck_assert_int_eq(parse(&t_own, operand, &o, &rc, err, sizeof(err)), 0);
    ck_assert_int_eq(o.operands, 1);
    ck_assert(o.flag);
}
END_TEST

Suite *suite_cli(void);

Suite *suite_cli(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("parse");

    tcase_add_loop_test(tc, usage_errors, 0, sizeof(errors) / sizeof(errors[0]));
    tcase_add_test(tc, every_kind);
    tcase_add_test(tc, last_wins_and_refused_values);
    tcase_add_test(tc, list_cap);
    tcase_add_test(tc, help_and_operands);
    suite_add_tcase(s, tc);
    return s;
}
