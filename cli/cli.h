/*
 * cli.h - the subcommands of the vaultgate binary and the helpers they share.
 *
 * Each subcommand is `int cmd_<name>(int argc, char **argv)` (argv[0] is the subcommand name)
 * and returns the process exit code of SPEC §8: 0 ok, 1 runtime failure, 2 usage, 3 vault
 * invalid or unreadable, 4 enforcement could not be set up.
 */
#ifndef VG_CLI_H
#define VG_CLI_H

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

#endif
