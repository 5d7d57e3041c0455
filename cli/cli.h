/*
 * cli.h - the subcommands of the vaultgate binary and what they share: the exit codes, the
 * option parser and its tables, the usage error line.
 *
 * Each subcommand is `int cmd_<name>(int argc, char **argv)` (argv[0] is the subcommand name)
 * and returns the process exit code of SPEC §8: 0 ok, 1 runtime failure, 2 usage, 3 vault
 * invalid or unreadable, 4 enforcement could not be set up.
 */
#ifndef VG_CLI_H
#define VG_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

enum {
    EXIT_OK = 0,
    EXIT_RUNTIME = 1,
    EXIT_USAGE = 2,
    EXIT_VAULT = 3,
    EXIT_ENFORCE = 4,
};

struct cli_command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *synopsis; /* one line for `vaultgate --help` */
};

#define CLI_LIST_MAX 64 /* values of one repeatable option */

/* The values of a repeatable option, in command-line order (pointers into argv). */
struct cli_list {
    const char *v[CLI_LIST_MAX];
    size_t n;
};

/* What an option's value is, and where cli_parse() puts it (at cli_opt.off in the options). */
enum cli_kind {
    CLI_FLAG,    /* bool = true; takes no value */
    CLI_STR,     /* const char *, pointing into argv; given again, the last one counts */
    CLI_LIST,    /* struct cli_list: every value, at most CLI_LIST_MAX */
    CLI_INT,     /* int: a whole number from lo to hi */
    CLI_SECONDS, /* double: a number from lo to hi */
    CLI_ENUM,    /* int: the index of the value in choices */
    CLI_SET,     /* set(opts, value) checks and stores it and words its own error */
};

#define CLI_ONCE     0x1u /* given twice is a usage error */
#define CLI_NONEMPTY 0x2u /* an empty value is a usage error */

/* One row of a subcommand's option table; the table ends with a row whose name is NULL. */
struct cli_opt {
    const char *name; /* "--vault" */
    enum cli_kind kind;
    unsigned flags; /* CLI_ONCE, CLI_NONEMPTY */
    size_t off;     /* offsetof() the field in the command's options struct (not CLI_SET) */
    double lo, hi;  /* CLI_INT, CLI_SECONDS: bounds, both included */
    const char *const *choices;            /* CLI_ENUM: the values, NULL-terminated */
    int (*set)(void *opts, const char *v); /* CLI_SET: 0, or EXIT_USAGE after one error line */
    const char *what;                      /* a missing value is "<name> needs <what>": "a FILE";
                                              NULL: "a value" */
};

/*
 * How a command words the errors of the grammar. All NULL/false is the standard wording (that of
 * `run`): "unknown option '--x'" (the name alone, never the value after '='), "unexpected
 * argument 'x'" for a word that is not an option (a single '-' word included), "--x needs a
 * value", "--x takes no value", "--x given more than once", "--x: empty value". The other
 * commands keep the words they have always printed.
 */
struct cli_words {
    const char *unknown;  /* instead of "unknown option" */
    const char *stray;    /* instead of "unexpected argument" */
    const char *needs;    /* before "--x needs ...": "option " */
    const char *repeated; /* instead of "given more than once" */
    bool whole;           /* a word starting with '-' is an option word, and an unknown one (or
                             a flag given a value) is echoed whole, "--x=v" */
    bool empty_needs;     /* an empty value of a CLI_NONEMPTY option is a missing value */
};

/* A subcommand's grammar: `--name VALUE` or `--name=VALUE`, flags, and operands. */
struct cli_spec {
    const char *cmd;            /* in every message: "vaultgate <cmd>: ..." */
    const struct cli_opt *opts; /* the option table */
    /* printed to stdout for -h or --help anywhere; NULL: those are words like any other */
    void (*usage)(FILE *out);
    /* a word that is not an option: 0 taken, -1 not (an error); NULL: none is taken */
    int (*operand)(void *opts, const char *word);
    const struct cli_words *words; /* NULL: the standard wording */
};

/*
 * Parses argv[1..argc-1] into opts by spec, in order; a value is the rest of the word after
 * '=' or else the next word, whatever it looks like. Returns 0 when every word was taken, or
 * -1 to stop with the exit code in *rc: EXIT_OK after the usage was printed, EXIT_USAGE after
 * one error line (cli_usage_error). Checks that need the whole set (a required option, two that
 * exclude each other) are the caller's.
 */
int cli_parse(const struct cli_spec *spec, int argc, char **argv, void *opts, int *rc);

/* Appends v to l; EXIT_USAGE (with the line) past CLI_LIST_MAX values, else 0. */
int cli_list_add(const char *cmd, const char *opt, struct cli_list *l, const char *v);

/* Prints "vaultgate <cmd>: <message>" (redacted) on one line to stderr; returns EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* True when arg is -h or --help. */
int cli_is_help(const char *arg);

int cmd_version(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_trust(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_hosts(int argc, char **argv);
int cmd_audit(int argc, char **argv);
int cmd_nft(int argc, char **argv);
int cmd_probe(int argc, char **argv);
int cmd_health(int argc, char **argv);

#endif
