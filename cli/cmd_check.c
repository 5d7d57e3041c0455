/*
 * cmd_check.c - `vaultgate check` (validate a vault, print its routing mode and why) and
 * `vaultgate hosts` (the /etc/hosts lines for default routing), SPEC §2-§3.
 *
 * Guarantees: no secret value reaches any output: everything printed comes from the policy's
 * names, patterns, counts, warnings and error lines, none of which carry secret bytes, and
 * every vault string they echo has passed the redactor (a credential pasted into the wrong
 * field is masked, the JSON path still named).
 */
#include "cli/cli.h"
#include "common/hostname.h"
#include "policy/policy.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK_ERR_MAX 1024

struct check_opts {
    const char *vault;
    const char *proxy_ip;
    bool json;
    int format; /* hosts: HOSTS_FORMAT_* */
};

/* What `hosts` prints, in the order of hosts_formats. */
enum { HOSTS_FORMAT_HOSTS = 0, HOSTS_FORMAT_KUBERNETES };
static const char *const hosts_formats[] = {"hosts", "kubernetes", NULL};

static void check_help(FILE *out)
{
    fprintf(out,
            "usage: vaultgate check --vault FILE [--json]\n\n"
            "Validates a vault file (SPEC §3) and prints its routing mode and the first reason,\n"
            "the rule, host-entry and secret counts, warnings and notes. Secret values are never\n"
            "printed.\n\n"
            "  --vault FILE  the vault to check\n"
            "  --json        print one JSON object instead of text\n\n"
            "exit status: 0 valid, 2 usage error, 3 vault invalid or unreadable\n");
}

static void hosts_help(FILE *out)
{
    fprintf(
        out,
        "usage: vaultgate hosts --vault FILE --proxy-ip IP [--format hosts|kubernetes]\n\n"
        "Prints one /etc/hosts line \"IP NAME\" per designated host of the vault (the exact\n"
        "DNS names of its rules and host_policy block entries), for default routing; with\n"
        "--format kubernetes, the same names as a pod spec's hostAliases: block. A vault\n"
        "that needs catch-all routing (a block default, a wildcard or regex rule or block\n"
        "entry) cannot be expressed in /etc/hosts: the reason goes to stderr, exit status 1.\n\n"
        "  --vault FILE    the vault\n"
        "  --proxy-ip IP   the address the sandbox reaches vaultgate at (IPv4 or IPv6)\n"
        "  --format F      hosts (/etc/hosts lines, the default) or kubernetes (hostAliases:)\n\n"
        "exit status: 0 ok, 1 the vault needs catch-all routing, 2 usage error,\n"
        "3 vault invalid or unreadable\n");
}

#define CHECK_OPT(field) offsetof(struct check_opts, field)

/* The words check and hosts have always used: "option --vault needs a value". */
static const struct cli_words check_words = {.needs = "option ", .whole = true};

static const struct cli_opt check_table[] = {
    {"--vault", CLI_STR, .off = CHECK_OPT(vault)},
    {"--json", CLI_FLAG, .off = CHECK_OPT(json)},
    {0},
};

static const struct cli_opt hosts_table[] = {
    {"--vault", CLI_STR, .off = CHECK_OPT(vault)},
    {"--proxy-ip", CLI_STR, .off = CHECK_OPT(proxy_ip)},
    {"--format", CLI_ENUM, .flags = CLI_ONCE, .off = CHECK_OPT(format), .choices = hosts_formats},
    {0},
};

/* Parses the options of check or hosts (spec), --vault required; -1 with *rc to stop, else 0. */
static int parse_opts(const struct cli_spec *spec, int argc, char **argv, struct check_opts *o,
                      int *rc)
{
    if (cli_parse(spec, argc, argv, o, rc) < 0)
        return -1;
    if (o->vault != NULL && o->vault[0] != '\0')
        return 0;
    *rc = cli_usage_error(spec->cmd, "missing required option --vault FILE");
    return -1;
}

static void print_text(const char *file, const struct policy *p)
{
    const char *reason = NULL, *const * msgs;
    enum policy_mode mode = policy_mode(p, &reason);
    size_t n;

    printf("ok: %s\n", file);
    if (mode == POLICY_MODE_CATCHALL)
        printf("mode: catch-all (%s)\n", reason);
    else
        printf("mode: default\n");
    printf("rules: %zu\nhost entries: %zu\nsecrets: %zu\n", policy_rule_count(p),
           policy_host_entry_count(p), policy_secret_count(p));
    printf("ca: %s\n", mode == POLICY_MODE_CATCHALL ? "unconstrained" : "constrained");
    for (size_t i = 0; i < policy_rule_count(p); i++) {
        char line[4096];

        policy_rule_describe(p, i, line, sizeof(line));
        printf("%s\n", line);
    }
    msgs = policy_warnings(p, &n);
    for (size_t i = 0; i < n; i++)
        printf("warning: %s\n", msgs[i]);
    msgs = policy_notes(p, &n);
    for (size_t i = 0; i < n; i++)
        printf("note: %s\n", msgs[i]);
}

static cJSON *str_array(const char *const *msgs, size_t n)
{
    cJSON *a = cJSON_CreateArray();

    for (size_t i = 0; a != NULL && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(msgs[i]));
    return a;
}

/* The --json object; p is NULL when the vault is invalid (err says why). */
static int print_json(const char *file, const struct policy *p, const char *err)
{
    cJSON *o = cJSON_CreateObject();
    const char *reason = NULL;
    enum policy_mode mode = p != NULL ? policy_mode(p, &reason) : POLICY_MODE_DEFAULT;
    const char *const *w = NULL, *const *nt = NULL;
    size_t nw = 0, nn = 0;
    char *text;

    if (o == NULL)
        return -1;
    if (p != NULL) {
        w = policy_warnings(p, &nw);
        nt = policy_notes(p, &nn);
    }
    cJSON_AddStringToObject(o, "file", file);
    cJSON_AddBoolToObject(o, "valid", p != NULL);
    cJSON_AddItemToObject(o, "error", p != NULL ? cJSON_CreateNull() : cJSON_CreateString(err));
    cJSON_AddItemToObject(
        o, "mode", p != NULL ? cJSON_CreateString(policy_mode_name(mode)) : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "mode_reason",
                          p != NULL ? cJSON_CreateString(reason) : cJSON_CreateNull());
    cJSON_AddNumberToObject(o, "rules", p != NULL ? (double)policy_rule_count(p) : 0);
    cJSON_AddNumberToObject(o, "host_entries", p != NULL ? (double)policy_host_entry_count(p) : 0);
    cJSON_AddNumberToObject(o, "secrets", p != NULL ? (double)policy_secret_count(p) : 0);
    if (p != NULL) {
        cJSON *rl = cJSON_AddArrayToObject(o, "rule_scopes");

        for (size_t i = 0; rl != NULL && i < policy_rule_count(p); i++)
            cJSON_AddItemToArray(rl, policy_rule_json(p, i));
    }
    cJSON_AddItemToObject(o, "warnings", str_array(w, nw));
    cJSON_AddItemToObject(o, "notes", str_array(nt, nn));
    cJSON_AddItemToObject(
        o, "ca",
        p == NULL
            ? cJSON_CreateNull()
            : cJSON_CreateString(mode == POLICY_MODE_CATCHALL ? "unconstrained" : "constrained"));
    text = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (text == NULL)
        return -1;
    printf("%s\n", text);
    free(text);
    return 0;
}

int cmd_check(int argc, char **argv)
{
    static const struct cli_spec spec = {"check", check_table, check_help, NULL, &check_words};
    struct check_opts o = {0};
    char err[CHECK_ERR_MAX] = "";
    struct policy *p = NULL;
    int rc;

    if (parse_opts(&spec, argc, argv, &o, &rc) < 0)
        return rc;
    p = policy_load(o.vault, err, sizeof(err));
    if (o.json) {
        if (print_json(o.vault, p, err) != 0)
            fprintf(stderr, "vaultgate check: out of memory\n");
    } else if (p != NULL) {
        print_text(o.vault, p);
    } else {
        fprintf(stderr, "error: %s: %s\n", o.vault, err);
    }
    rc = p != NULL ? EXIT_OK : EXIT_VAULT;
    policy_unref(&p);
    return rc;
}

/*
 * Prints the /etc/hosts lines, or the hostAliases: block (one entry for ip, every name under
 * it; the names are validated DNS names and ip a normalised address, so double quotes need no
 * escaping). IP literals cannot be redirected by name, so they get a note.
 */
static void print_hosts(const struct policy *p, const char *ip, int format)
{
    size_t n, shown = 0;
    const struct policy_name *names = policy_names(p, &n);

    for (size_t i = 0; i < n; i++) {
        if (!names[i].rule && !names[i].block)
            continue;
        if (names[i].ip) {
            fprintf(stderr,
                    "vaultgate hosts: note: %s is an IP literal; /etc/hosts cannot route it\n",
                    names[i].name);
            continue;
        }
        if (format == HOSTS_FORMAT_HOSTS) {
            printf("%s %s\n", ip, names[i].name);
            continue;
        }
        if (shown++ == 0)
            printf("hostAliases:\n  - ip: \"%s\"\n    hostnames:\n", ip);
        printf("      - \"%s\"\n", names[i].name);
    }
    if (format == HOSTS_FORMAT_KUBERNETES && shown == 0)
        printf("hostAliases: []\n");
}

int cmd_hosts(int argc, char **argv)
{
    static const struct cli_spec spec = {"hosts", hosts_table, hosts_help, NULL, &check_words};
    struct check_opts o = {0};
    char err[CHECK_ERR_MAX] = "", ip[HOSTNAME_BUFSZ];
    struct policy *p = NULL;
    const char *reason = NULL;
    int rc, kind;

    if (parse_opts(&spec, argc, argv, &o, &rc) < 0)
        return rc;
    if (o.proxy_ip == NULL || o.proxy_ip[0] == '\0')
        return cli_usage_error("hosts", "missing required option --proxy-ip IP");
    kind = hostname_normalize(o.proxy_ip, strlen(o.proxy_ip), ip, sizeof(ip));
    if (kind != HOSTNAME_IPV4 && kind != HOSTNAME_IPV6)
        return cli_usage_error("hosts", "option --proxy-ip: '%s' is not an IPv4 or IPv6 address",
                               o.proxy_ip);
    /* names only: no env variable or secret file needs to be there (SPEC §2) */
    p = policy_load_unread(o.vault, err, sizeof(err));
    if (p == NULL) {
        fprintf(stderr, "error: %s: %s\n", o.vault, err);
        return EXIT_VAULT;
    }
    if (policy_mode(p, &reason) == POLICY_MODE_CATCHALL) {
        fprintf(stderr,
                "vaultgate hosts: the vault needs catch-all routing (%s); /etc/hosts cannot "
                "express that: use `vaultgate nft`\n",
                reason);
        rc = EXIT_RUNTIME;
    } else {
        print_hosts(p, ip, o.format);
        rc = EXIT_OK;
    }
    policy_unref(&p);
    return rc;
}
