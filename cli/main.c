/*
 * main.c - the vaultgate binary: dispatches to one subcommand (SPEC §2). `vaultgate help`
 * (or --help, -h) lists them on stdout; `vaultgate help COMMAND` is `vaultgate COMMAND --help`.
 */
#include "cli/cli.h"
#include "common/redact.h"
#include "common/suggest.h"
#include "proxy/evmem.h"

#include <stdio.h>
#include <string.h>

static int cmd_help(int argc, char **argv);

static const struct cli_command commands[] = {
    /* subcommands, in the order of SPEC §2 */
    {"run", cmd_run, "run the gateway (foreground)"},
    {"check", cmd_check, "validate a vault and print its routing mode"},
    {"hosts", cmd_hosts, "print /etc/hosts lines for default routing"},
    {"nft", cmd_nft, "print or apply the nftables ruleset for catch-all routing"},
    {"probe", cmd_probe, "verify from inside a sandbox that egress is enforced"},
    {"audit", cmd_audit, "read the audit store"},
    {"trust", cmd_trust, "write a CA bundle and print the environment lines runtimes need"},
    {"health", cmd_health, "ask a running gateway's admin API for /healthz or /readyz"},
    {"version", cmd_version, "print the version"},
    {"help", cmd_help, "this list, or `vaultgate help COMMAND`: the usage of one command"},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: vaultgate <command> [options]\n\n"
                 "A credential-injecting TLS egress proxy for sandboxes.\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].synopsis);
    fprintf(out, "\n`vaultgate <command> --help` describes each command; man vaultgate(8) and\n"
                 "vaultgate-vault(5) describe all of them and the vault file.\n");
}

static const struct cli_command *find_command(const char *name)
{
    for (size_t i = 0; i < NCOMMANDS; i++) {
        if (strcmp(name, commands[i].name) == 0)
            return &commands[i];
    }
    return NULL;
}

/* One line on stderr (the name redacted), with the nearest command when name looks like a typo
 * of one; exit 2. prog: "vaultgate" or "vaultgate help". */
static int unknown_command(const char *prog, const char *name)
{
    const char *names[NCOMMANDS], *near;
    char msg[512];

    for (size_t i = 0; i < NCOMMANDS; i++)
        names[i] = commands[i].name;
    near = suggest_nearest(name, names, NCOMMANDS);
    if (near != NULL)
        snprintf(msg, sizeof(msg), "unknown command '%.200s'; did you mean '%s'?", name, near);
    else
        snprintf(msg, sizeof(msg), "unknown command '%.200s'", name);
    redact_text(msg);
    fprintf(stderr, "%s: %s (see: vaultgate help)\n", prog, msg);
    return EXIT_USAGE;
}

static int cmd_help(int argc, char **argv)
{
    const struct cli_command *c;
    char *sub[3];

    if (argc < 2 || cli_is_help(argv[1])) {
        usage(stdout);
        return EXIT_OK;
    }
    if (argc > 2)
        return cli_usage_error("help", "unexpected argument '%s'", argv[2]);
    if ((c = find_command(argv[1])) == NULL)
        return unknown_command("vaultgate help", argv[1]);
    if (c->fn == cmd_help) {
        usage(stdout);
        return EXIT_OK;
    }
    sub[0] = argv[1];
    sub[1] = (char *)"--help";
    sub[2] = NULL;
    return c->fn(2, sub);
}

int main(int argc, char **argv)
{
    const struct cli_command *c;

    /* before OpenSSL's first allocation, or OpenSSL keeps its own allocator (evmem.h): a
     * worker then keeps the small blocks of its TLS records, nothing else changes */
    (void)evmem_install_ssl();
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
    if ((c = find_command(argv[1])) != NULL)
        return c->fn(argc - 1, argv + 1);
    return unknown_command("vaultgate", argv[1]);
}
