/*
 * cmd_nft.c - `vaultgate nft`: the nftables ruleset for catch-all routing (SPEC §9).
 *
 * Renders one table, `inet vaultgate`, for either enforcement point:
 *   --where gateway  the namespace that routes the sandbox: TCP 80/443 from the sandbox is
 *                    redirected to vaultgate's listeners, everything else it forwards is dropped
 *                    except DNS to --dns, and it reaches nothing on the gateway itself but the
 *                    listeners (and DNS).
 *   --where sandbox  the sandbox's own namespace: its TCP 80/443 is DNATed to --proxy-ip, all
 *                    other output except DNS and loopback is dropped.
 * The ruleset begins by creating and deleting the table, so applying it again replaces it in
 * one atomic transaction. Every value put into the ruleset is validated first (addresses parsed,
 * ports numeric, interface names from a fixed charset): nothing from the command line is pasted
 * into it unchecked.
 */
#include "proxy/cli.h"
#include "policy/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NFT_RULESET_MAX (16 * 1024)

struct nft_opts {
    const char *vault;
    int gateway; /* 1 gateway, 0 sandbox */
    char proxy_ip[INET6_ADDRSTRLEN];
    int proxy_v6;
    int https_port;
    int http_port;
    char dns[INET6_ADDRSTRLEN];
    int dns_v6;
    const char *sandbox_if;
    int apply;
};

struct nft_buf {
    char text[NFT_RULESET_MAX];
    size_t len;
    int overflow;
};

static void emit(struct nft_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit(struct nft_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (b->overflow)
        return;
    va_start(ap, fmt);
    n = vsnprintf(b->text + b->len, sizeof(b->text) - b->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(b->text) - b->len) {
        b->overflow = 1;
        return;
    }
    b->len += (size_t)n;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: vaultgate nft --vault FILE [--where gateway|sandbox] [--proxy-ip IP]\n"
            "                     [--https-port N] [--http-port N] [--dns IP]\n"
            "                     [--sandbox-if IFNAME] [--apply]\n"
            "\n"
            "Prints (or, with --apply, installs with `nft -f -`) the nftables ruleset that makes\n"
            "vaultgate the only way out of a sandbox (table inet vaultgate; re-applying replaces\n"
            "it).\n"
            "  --where gateway   (default) for the namespace routing the sandbox's traffic:\n"
            "                    redirect TCP 80/443 from the sandbox to the listeners, drop the\n"
            "                    rest except DNS to --dns. --sandbox-if names the interface the\n"
            "                    sandbox's traffic arrives on (default: every interface but lo).\n"
            "  --where sandbox   for the sandbox's own namespace: DNAT TCP 80/443 to --proxy-ip,\n"
            "                    drop all other output except DNS to --dns and loopback.\n"
            "  --https-port N    vaultgate's TLS listener port (default 8443)\n"
            "  --http-port N     vaultgate's plain-HTTP listener port (default 8080)\n"
            "  --dns IP          the one resolver the sandbox may reach (UDP and TCP 53)\n"
            "  --apply           run `nft -f -`; exit 4 if that fails\n");
}

static int parse_port(const char *s, int *out)
{
    char *end;
    long v;

    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || *s == '\0' || *end != '\0' || v < 1 || v > 65535)
        return -1;
    *out = (int)v;
    return 0;
}

/* Canonical text form of an IP address; v6 set for IPv6. 0 or -1. */
static int parse_ip(const char *s, char *out, size_t outsz, int *v6)
{
    unsigned char bin[16];

    if (inet_pton(AF_INET, s, bin) == 1) {
        *v6 = 0;
        return inet_ntop(AF_INET, bin, out, (socklen_t)outsz) != NULL ? 0 : -1;
    }
    if (inet_pton(AF_INET6, s, bin) == 1) {
        *v6 = 1;
        return inet_ntop(AF_INET6, bin, out, (socklen_t)outsz) != NULL ? 0 : -1;
    }
    return -1;
}

static int valid_ifname(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n >= 16)
        return 0;
    return strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.@") == n;
}

static void render_gateway(struct nft_buf *b, const struct nft_opts *o)
{
    char from[64];
    const char *fam = o->dns_v6 ? "ip6" : "ip";

    if (o->sandbox_if != NULL)
        snprintf(from, sizeof(from), "iifname \"%s\"", o->sandbox_if);
    else
        snprintf(from, sizeof(from), "iifname != \"lo\"");

    emit(b, "table inet vaultgate {\n");
    emit(b, "\t# Packets from the sandbox that matched no allowed path.\n");
    emit(b, "\tcounter dropped_forward { }\n\tcounter dropped_input { }\n\n");
    emit(b, "\t# Every TCP connection to 80/443 from the sandbox lands on vaultgate.\n");
    emit(b, "\tchain prerouting {\n");
    emit(b, "\t\ttype nat hook prerouting priority -100; policy accept;\n");
    emit(b, "\t\t%s tcp dport 443 counter redirect to :%d\n", from, o->https_port);
    emit(b, "\t\t%s tcp dport 80 counter redirect to :%d\n", from, o->http_port);
    emit(b, "\t}\n\n");
    emit(b, "\t# The sandbox reaches nothing on this host but the listeners (and DNS).\n");
    emit(b, "\tchain input {\n");
    emit(b, "\t\ttype filter hook input priority filter; policy accept;\n");
    emit(b, "\t\t%s ct state established,related accept\n", from);
    emit(b, "\t\t%s tcp dport { %d, %d } ct status dnat accept\n", from, o->https_port,
         o->http_port);
    if (o->dns[0] != '\0') {
        emit(b, "\t\t%s %s daddr %s udp dport 53 accept\n", from, fam, o->dns);
        emit(b, "\t\t%s %s daddr %s tcp dport 53 accept\n", from, fam, o->dns);
    }
    emit(b, "\t\t%s counter name dropped_input drop\n", from);
    emit(b, "\t}\n\n");
    emit(b, "\t# Nothing from the sandbox is forwarded but DNS to the one resolver.\n");
    emit(b, "\tchain forward {\n");
    emit(b, "\t\ttype filter hook forward priority filter; policy accept;\n");
    if (o->dns[0] != '\0') {
        emit(b, "\t\t%s %s daddr %s udp dport 53 accept\n", from, fam, o->dns);
        emit(b, "\t\t%s %s daddr %s tcp dport 53 accept\n", from, fam, o->dns);
    }
    emit(b, "\t\t%s counter name dropped_forward drop\n", from);
    emit(b, "\t}\n}\n");
}

static void render_sandbox(struct nft_buf *b, const struct nft_opts *o)
{
    const char *pfam = o->proxy_v6 ? "ip6" : "ip";
    const char *dfam = o->dns_v6 ? "ip6" : "ip";
    const char *nat = o->proxy_v6 ? "ip6" : "ip";
    int v6 = o->proxy_v6;

    emit(b, "table inet vaultgate {\n");
    emit(b, "\tcounter dropped_output { }\n\n");
    emit(b, "\t# This namespace's TCP 80/443 goes to vaultgate, whatever address it named.\n");
    emit(b, "\tchain output_nat {\n");
    emit(b, "\t\ttype nat hook output priority -100; policy accept;\n");
    emit(b, "\t\toifname \"lo\" accept\n");
    emit(b, "\t\tmeta nfproto %s tcp dport 443 counter dnat %s to %s%s%s:%d\n",
         v6 ? "ipv6" : "ipv4", nat, v6 ? "[" : "", o->proxy_ip, v6 ? "]" : "", o->https_port);
    emit(b, "\t\tmeta nfproto %s tcp dport 80 counter dnat %s to %s%s%s:%d\n", v6 ? "ipv6" : "ipv4",
         nat, v6 ? "[" : "", o->proxy_ip, v6 ? "]" : "", o->http_port);
    emit(b, "\t}\n\n");
    emit(b, "\t# Everything else leaving this namespace is dropped and counted.\n");
    emit(b, "\tchain output_filter {\n");
    emit(b, "\t\ttype filter hook output priority filter; policy drop;\n");
    emit(b, "\t\toifname \"lo\" accept\n");
    emit(b, "\t\tct state established,related accept\n");
    emit(b, "\t\t%s daddr %s tcp dport { %d, %d } accept\n", pfam, o->proxy_ip, o->https_port,
         o->http_port);
    if (o->dns[0] != '\0') {
        emit(b, "\t\t%s daddr %s udp dport 53 accept\n", dfam, o->dns);
        emit(b, "\t\t%s daddr %s tcp dport 53 accept\n", dfam, o->dns);
    }
    emit(b, "\t\tcounter name dropped_output drop\n");
    emit(b, "\t}\n}\n");
}

static int nft_apply(const char *text, size_t len)
{
    int fds[2];
    pid_t pid;
    int status;
    size_t off = 0;

    if (pipe(fds) != 0)
        return -1;
    pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        dup2(fds[0], STDIN_FILENO);
        close(fds[0]);
        close(fds[1]);
        execlp("nft", "nft", "-f", "-", (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    while (off < len) {
        ssize_t w = write(fds[1], text + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    close(fds[1]);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return -1;
    }
    return off == len && WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int parse_opts(int argc, char **argv, struct nft_opts *o)
{
    static const struct option longopts[] = {
        {"vault", required_argument, NULL, 'v'},
        {"where", required_argument, NULL, 'w'},
        {"proxy-ip", required_argument, NULL, 'p'},
        {"https-port", required_argument, NULL, 's'},
        {"http-port", required_argument, NULL, 't'},
        {"dns", required_argument, NULL, 'd'},
        {"sandbox-if", required_argument, NULL, 'i'},
        {"apply", no_argument, NULL, 'a'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;

    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'v':
            o->vault = optarg;
            break;
        case 'w':
            if (strcmp(optarg, "gateway") != 0 && strcmp(optarg, "sandbox") != 0)
                return cli_usage_error("nft", "--where: expected gateway or sandbox");
            o->gateway = strcmp(optarg, "gateway") == 0;
            break;
        case 'p':
            if (parse_ip(optarg, o->proxy_ip, sizeof(o->proxy_ip), &o->proxy_v6) != 0)
                return cli_usage_error("nft", "--proxy-ip: not an IP address");
            break;
        case 's':
            if (parse_port(optarg, &o->https_port) != 0)
                return cli_usage_error("nft", "--https-port: expected a port 1-65535");
            break;
        case 't':
            if (parse_port(optarg, &o->http_port) != 0)
                return cli_usage_error("nft", "--http-port: expected a port 1-65535");
            break;
        case 'd':
            if (parse_ip(optarg, o->dns, sizeof(o->dns), &o->dns_v6) != 0)
                return cli_usage_error("nft", "--dns: not an IP address");
            break;
        case 'i':
            if (!valid_ifname(optarg))
                return cli_usage_error("nft", "--sandbox-if: not an interface name");
            o->sandbox_if = optarg;
            break;
        case 'a':
            o->apply = 1;
            break;
        case 'h':
            usage(stdout);
            return -1;
        case ':':
            return cli_usage_error("nft", "%s needs a value", argv[optind - 1]);
        default:
            return cli_usage_error("nft", "unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return cli_usage_error("nft", "unexpected argument '%s'", argv[optind]);
    if (o->vault == NULL)
        return cli_usage_error("nft", "--vault is required");
    if (!o->gateway && o->proxy_ip[0] == '\0')
        return cli_usage_error("nft", "--where sandbox needs --proxy-ip");
    return 0;
}

int cmd_nft(int argc, char **argv)
{
    struct nft_opts o = {.gateway = 1, .https_port = 8443, .http_port = 8080};
    struct nft_buf *b = NULL;
    struct policy *p = NULL;
    char err[512];
    const char *reason = NULL;
    enum policy_mode mode;
    int rc;

    rc = parse_opts(argc, argv, &o);
    if (rc != 0)
        return rc < 0 ? EXIT_OK : rc;
    p = policy_load(o.vault, err, sizeof(err));
    if (p == NULL) {
        fprintf(stderr, "vaultgate nft: %s\n", err);
        return EXIT_VAULT;
    }
    mode = policy_mode(p, &reason);
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        rc = EXIT_RUNTIME;
        goto out;
    }
    emit(b, "#!/usr/sbin/nft -f\n");
    emit(b, "# vaultgate %s ruleset for run %s (vault routing mode: %s%s%s)\n",
         o.gateway ? "gateway" : "sandbox", policy_run_id(p), policy_mode_name(mode),
         reason != NULL ? ", " : "", reason != NULL ? reason : "");
    emit(b, "# Applying it again replaces the table in one transaction.\n");
    emit(b, "table inet vaultgate\ndelete table inet vaultgate\n\n");
    if (o.gateway)
        render_gateway(b, &o);
    else
        render_sandbox(b, &o);
    if (b->overflow) {
        fprintf(stderr, "vaultgate nft: ruleset too large\n");
        rc = EXIT_RUNTIME;
        goto out;
    }
    if (mode == POLICY_MODE_DEFAULT)
        fprintf(stderr, "vaultgate nft: note: the vault needs only default routing; catch-all "
                        "routing enforces it all the same\n");
    if (!o.apply) {
        fwrite(b->text, 1, b->len, stdout);
        rc = EXIT_OK;
        goto out;
    }
    if (nft_apply(b->text, b->len) != 0) {
        fprintf(stderr, "vaultgate nft: `nft -f -` failed: the ruleset is not installed\n");
        rc = EXIT_ENFORCE;
        goto out;
    }
    fprintf(stderr, "vaultgate nft: table inet vaultgate installed (%s)\n",
            o.gateway ? "gateway" : "sandbox");
    rc = EXIT_OK;
out:
    free(b);
    policy_unref(&p);
    return rc;
}
