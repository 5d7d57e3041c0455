/*
 * cli.c - what the subcommands share: the option parser that applies their tables, the usage
 * error line, and `vaultgate version`.
 *
 * Guarantees: a usage error is one line naming the option, and what it echoes of the command
 * line (an option's value, a stray argument) has passed the redactor, so a credential typed into
 * the wrong place is not printed back. The parser takes the words in order and stops at the
 * first error; it writes an option's field only with a value that passed its checks.
 */
#include "cli/cli.h"
#include "common/redact.h"
#include "common/suggest.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CLI_SUGGEST_MAX 64 /* options of one table compared for "did you mean" */
#define CLI_NAME_MAX    64 /* an unknown option's name is echoed up to this (less one) */

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    redact_text(msg);
    fprintf(stderr, "vaultgate %s: %s (see: vaultgate %s --help)\n", cmd, msg, cmd);
    return EXIT_USAGE;
}

int cli_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int cli_list_add(const char *cmd, const char *opt, struct cli_list *l, const char *v)
{
    if (l->n >= CLI_LIST_MAX)
        return cli_usage_error(cmd, "%s: more than %d values", opt, CLI_LIST_MAX);
    l->v[l->n++] = v;
    return 0;
}

/* ---- values -------------------------------------------------------------------------------- */

static int parse_number(const char *cmd, const struct cli_opt *o, const char *v, double *out)
{
    char *end = NULL;
    double d;

    errno = 0;
    d = strtod(v, &end);
    if (v[0] == '\0' || *end != '\0' || errno != 0 || !(d >= o->lo && d <= o->hi))
        return cli_usage_error(cmd, "%s: expected a number from %g to %g, got '%s'", o->name, o->lo,
                               o->hi, v);
    *out = d;
    return 0;
}

/* "expected a, b or c, got 'v'" from the choices of a CLI_ENUM option. */
static int bad_choice(const char *cmd, const struct cli_opt *o, const char *v)
{
    char list[256];
    size_t n = 0;

    list[0] = '\0';
    for (size_t i = 0; o->choices[i] != NULL && n < sizeof(list); i++) {
        const char *sep = i == 0 ? "" : o->choices[i + 1] == NULL ? " or " : ", ";

        n += (size_t)snprintf(list + n, sizeof(list) - n, "%s%s", sep, o->choices[i]);
    }
    return cli_usage_error(cmd, "%s: expected %s, got '%s'", o->name, list, v);
}

/* Stores the value v of option o into opts. 0 or EXIT_USAGE. */
static int apply_value(const char *cmd, const struct cli_opt *o, const char *v, void *opts)
{
    char *field = (char *)opts + o->off;
    double d = 0; /* gcc 12 -O3 does not see parse_number() set it on success */

    switch (o->kind) {
    case CLI_STR:
        *(const char **)(void *)field = v;
        return 0;
    case CLI_LIST:
        return cli_list_add(cmd, o->name, (struct cli_list *)(void *)field, v);
    case CLI_INT:
        if (parse_number(cmd, o, v, &d) != 0)
            return EXIT_USAGE;
        if (d != (double)(int)d)
            return cli_usage_error(cmd, "%s: expected an integer, got '%s'", o->name, v);
        *(int *)(void *)field = (int)d;
        return 0;
    case CLI_SECONDS:
        return parse_number(cmd, o, v, (double *)(void *)field);
    case CLI_ENUM:
        for (int i = 0; o->choices[i] != NULL; i++) {
            if (strcmp(v, o->choices[i]) == 0) {
                *(int *)(void *)field = i;
                return 0;
            }
        }
        return bad_choice(cmd, o, v);
    case CLI_SET:
        return o->set(opts, v);
    case CLI_FLAG:
        break;
    }
    return cli_usage_error(cmd, "%s takes no value", o->name);
}

/* ---- words --------------------------------------------------------------------------------- */

static const struct cli_words standard_words = {0};

/* The bit of table row k in the seen mask (rows past the 64th are never refused as repeated). */
static uint64_t row_bit(size_t k)
{
    return k < 64 ? UINT64_C(1) << k : 0;
}

static const char *word_or(const char *w, const char *standard)
{
    return w != NULL ? w : standard;
}

static int missing_value(const struct cli_spec *spec, const struct cli_opt *o)
{
    return cli_usage_error(spec->cmd, "%s%s needs %s", word_or(spec->words->needs, ""), o->name,
                           word_or(o->what, "a value"));
}

/* A word that names no option of the table (name is the part before '='); the nearest option
 * when the name looks like a typo of one. */
static int unknown_option(const struct cli_spec *spec, const char *word, const char *name)
{
    const char *names[CLI_SUGGEST_MAX], *near = NULL;
    size_t n = 0;

    /* compared without the leading "--" */
    for (; spec->opts[n].name != NULL && n < CLI_SUGGEST_MAX; n++)
        names[n] = spec->opts[n].name + 2;
    if (strncmp(name, "--", 2) == 0)
        near = suggest_nearest(name + 2, names, n);
    if (near != NULL)
        return cli_usage_error(spec->cmd, "%s '%s'; did you mean --%s?",
                               word_or(spec->words->unknown, "unknown option"),
                               spec->words->whole ? word : name, near);
    return cli_usage_error(spec->cmd, "%s '%s'", word_or(spec->words->unknown, "unknown option"),
                           spec->words->whole ? word : name);
}

static int stray_word(const struct cli_spec *spec, const char *word)
{
    return cli_usage_error(spec->cmd, "%s '%s'", word_or(spec->words->stray, "unexpected argument"),
                           word);
}

static const struct cli_opt *find_opt(const struct cli_spec *spec, const char *name, size_t *index)
{
    for (size_t i = 0; spec->opts[i].name != NULL; i++) {
        if (strcmp(spec->opts[i].name, name) == 0) {
            *index = i;
            return &spec->opts[i];
        }
    }
    return NULL;
}

/*
 * One option word at argv[*i] (the next word is its value unless it has '='): checks, then
 * stores. seen has a bit per table row, for CLI_ONCE. 0 or EXIT_USAGE.
 */
static int take_option(const struct cli_spec *spec, int argc, char **argv, int *i, void *opts,
                       uint64_t *seen)
{
    const char *word = argv[*i], *eq = strchr(word, '='), *v;
    char name[CLI_NAME_MAX];
    const struct cli_opt *o;
    size_t k = 0;

    snprintf(name, sizeof(name), "%.*s", eq != NULL ? (int)(eq - word) : (int)strlen(word), word);
    if ((o = find_opt(spec, name, &k)) == NULL)
        return unknown_option(spec, word, name);
    if (o->kind == CLI_FLAG) {
        if (eq != NULL)
            return spec->words->whole ? unknown_option(spec, word, name)
                                      : cli_usage_error(spec->cmd, "%s takes no value", o->name);
        *(bool *)(void *)((char *)opts + o->off) = true;
        return 0;
    }
    if (eq != NULL)
        v = eq + 1;
    else if (*i + 1 < argc)
        v = argv[++*i];
    else
        return missing_value(spec, o);
    if ((o->flags & CLI_ONCE) && (*seen & row_bit(k)))
        return cli_usage_error(spec->cmd, "%s %s", o->name,
                               word_or(spec->words->repeated, "given more than once"));
    if ((o->flags & CLI_NONEMPTY) && v[0] == '\0')
        return spec->words->empty_needs ? missing_value(spec, o)
                                        : cli_usage_error(spec->cmd, "%s: empty value", o->name);
    *seen |= row_bit(k);
    return apply_value(spec->cmd, o, v, opts);
}

int cli_parse(const struct cli_spec *spec0, int argc, char **argv, void *opts, int *rc)
{
    struct cli_spec spec = *spec0;
    uint64_t seen = 0;

    if (spec.words == NULL)
        spec.words = &standard_words;
    for (int i = 1; i < argc; i++) {
        const char *w = argv[i];
        int r;

        if (spec.usage != NULL && cli_is_help(w)) {
            spec.usage(stdout);
            *rc = EXIT_OK;
            return -1;
        }
        if (strncmp(w, "--", 2) == 0 || (spec.words->whole && w[0] == '-' && w[1] != '\0'))
            r = take_option(&spec, argc, argv, &i, opts, &seen);
        else if (spec.operand == NULL || spec.operand(opts, w) != 0)
            r = stray_word(&spec, w);
        else
            r = 0;
        if (r != 0) {
            *rc = r;
            return -1;
        }
    }
    return 0;
}

/* ---- version ------------------------------------------------------------------------------- */

static void version_usage(FILE *out)
{
    fprintf(out, "usage: vaultgate version\n\nPrints the version of vaultgate.\n");
}

int cmd_version(int argc, char **argv)
{
    static const struct cli_opt table[] = {{0}};
    static const struct cli_words words = {.unknown = "unexpected argument", .whole = true};
    static const struct cli_spec spec = {"version", table, version_usage, NULL, &words};
    int rc;

    if (cli_parse(&spec, argc, argv, NULL, &rc) < 0)
        return rc;
    printf("vaultgate %s\n", VAULTGATE_VERSION);
    return EXIT_OK;
}
