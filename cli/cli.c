/*
 * cli.c - helpers shared by the subcommands.
 *
 * Guarantees: a usage error is one line, and what it echoes of the command line (an option's
 * value, a stray argument) has passed the redactor, so a credential typed into the wrong place
 * is not printed back.
 */
#include "cli/cli.h"
#include "common/redact.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

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

int cmd_version(int argc, char **argv)
{
    if (argc > 1) {
        if (cli_is_help(argv[1])) {
            printf("usage: vaultgate version\n\nPrints the version of vaultgate.\n");
            return EXIT_OK;
        }
        return cli_usage_error("version", "unexpected argument '%s'", argv[1]);
    }
    printf("vaultgate %s\n", VAULTGATE_VERSION);
    return EXIT_OK;
}
