/*
 * main.c - the vaultgate binary: dispatches to one subcommand (SPEC §2).
 */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

static const struct cli_command commands[] = {
    /* subcommands, in the order of SPEC §2 */
    {"run", cmd_run, "run the gateway (foreground)"},
    {"check", cmd_check, "validate a vault and print its routing mode"},
    {"hosts", cmd_hosts, "print /etc/hosts lines for default routing"},
    {"nft", cmd_nft, "print or apply the nftables ruleset for catch-all routing"},
    {"probe", cmd_probe, "verify from inside a sandbox that egress is enforced"},
    {"audit", cmd_audit, "read the audit store"},
    {"trust", cmd_trust, "write a CA bundle and print the environment lines runtimes need"},
    {"version", cmd_version, "print the version"},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: vaultgate <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].synopsis);
    fprintf(out, "\n`vaultgate <command> --help` describes each command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (cli_is_help(argv[1])) {
        usage(stdout);
        return EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0)
        return cmd_version(1, argv + 1);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "vaultgate: unknown command '%s' (see: vaultgate --help)\n", argv[1]);
    return EXIT_USAGE;
}
