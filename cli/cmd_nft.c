/*
 * cmd_nft.c - `vaultgate nft`: the nftables ruleset for catch-all routing (SPEC §9).
 *
 * Renders one table, `inet vaultgate`, for either enforcement point:
 *   --where gateway  the namespace that routes the sandbox: TCP 80/443 from the sandbox, of
 *                    either family, is redirected to vaultgate's listeners (and with
 *                    --dns-redirect every DNS packet to its DNS listener); it reaches nothing on
 *                    the gateway itself but those, and nothing is forwarded but DNS to --dns.
 *   --where sandbox  the sandbox's own namespace: its TCP 80/443 (and DNS with --dns-redirect)
 *                    is DNATed to --proxy-ip, and IPv6 to --proxy-ip6; all other output but
 *                    loopback and DNS to --dns is refused or dropped. With --exempt-uid UID
 *                    (a sidecar: vaultgate shares the sandbox's namespace), whatever sockets of
 *                    UID send passes first, neither DNATed nor refused, so vaultgate's own
 *                    upstream connections leave while every other process's land on it.
 * In both, every other UDP packet is refused with ICMP administratively prohibited (QUIC falls
 * back to TCP at once instead of waiting), and in the sandbox a family with no proxy address is
 * refused at once (TCP reset, ICMP otherwise), so clients fall back to the other; what is
 * refused or dropped is counted in named counters.
 * The ruleset begins by creating and deleting the table, so applying it again replaces it in
 * one atomic transaction. Every value put into the ruleset is validated first (addresses parsed,
 * ports numeric, interface names from a fixed charset): nothing from the command line is pasted
 * into it unchecked.
 */
#include "cli/cli.h"
#include "policy/policy.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define NFT_RULESET_MAX (16 * 1024)
#define NFT_STDERR_MAX  (8 * 1024) /* of nft's stderr, kept to find its reason */

struct nft_opts {
    const char *vault;
    int gateway; /* 1 gateway, 0 sandbox */
    char proxy_ip[INET6_ADDRSTRLEN];
    int proxy_v6;
    char proxy_ip6[INET6_ADDRSTRLEN]; /* --proxy-ip6 (sandbox): IPv6 goes there too */
    int https_port;
    int http_port;
    char dns[INET6_ADDRSTRLEN];
    int dns_v6;
    int dns_redirect; /* --dns-redirect PORT, 0 when not given */
    const char *sandbox_if;
    int exempt;       /* --exempt-uid given */
    uid_t exempt_uid; /* whose output passes untouched (sandbox) */
    bool apply;
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
            "                     [--proxy-ip6 IP6] [--https-port N] [--http-port N]\n"
            "                     [--dns-redirect PORT | --dns IP] [--sandbox-if IFNAME]\n"
            "                     [--exempt-uid UID] [--apply]\n"
            "\n"
            "Prints (or, with --apply, installs with `nft -f -`) the nftables ruleset that makes\n"
            "vaultgate the only way out of a sandbox (table inet vaultgate; re-applying replaces\n"
            "it).\n"
            "  --where gateway   (default) for the namespace routing the sandbox's traffic:\n"
            "                    redirect TCP 80/443 (IPv4 and IPv6) from the sandbox to the\n"
            "                    listeners, refuse other UDP, drop the rest. --sandbox-if names\n"
            "                    the interface the sandbox's traffic arrives on (default: every\n"
            "                    interface but lo).\n"
            "  --where sandbox   for the sandbox's own namespace: DNAT TCP 80/443 to --proxy-ip\n"
            "                    (and --proxy-ip6), refuse other UDP and IPv6 with no proxy\n"
            "                    address, drop the rest of the output except loopback.\n"
            "  --proxy-ip6 IP6   (sandbox) vaultgate's IPv6 address; without it IPv6 is refused\n"
            "  --https-port N    vaultgate's TLS listener port (default 8443)\n"
            "  --http-port N     vaultgate's plain-HTTP listener port (default 8080)\n"
            "  --dns-redirect PORT  every DNS packet of the sandbox (UDP and TCP 53, any\n"
            "                    address) goes to vaultgate's DNS listener on PORT\n"
            "  --dns IP          instead: the one resolver the sandbox may reach (UDP and TCP\n"
            "                    53); names looked up there can carry data out\n"
            "  --exempt-uid UID  (sandbox) a user id or name whose output passes untouched:\n"
            "                    vaultgate's own, when it shares the sandbox's namespace\n"
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

/* The two families of the ruleset, with what `nft` calls each in its matches and rejects. */
struct nft_family {
    const char *nfproto; /* "ipv4" */
    const char *addr;    /* "ip": `ip daddr`, `dnat ip to` */
    const char *icmp;    /* "icmp": `reject with icmp type admin-prohibited` */
};

static const struct nft_family nft_families[2] = {
    {"ipv4", "ip", "icmp"},
    {"ipv6", "ip6", "icmpv6"},
};

/* Every UDP packet that reaches this rule is answered with ICMP administratively prohibited
 * (QUIC falls back to TCP at once) and counted in rejected_udp; from is "" or a match plus a
 * space. */
static void emit_udp_reject(struct nft_buf *b, const char *from, const char *indent)
{
    for (int i = 0; i < 2; i++) {
        const struct nft_family *f = &nft_families[i];

        emit(b,
             "%s%smeta nfproto %s meta l4proto udp counter name rejected_udp reject with %s "
             "type admin-prohibited\n",
             indent, from, f->nfproto, f->icmp);
    }
}

static void render_gateway(struct nft_buf *b, const struct nft_opts *o)
{
    char from[64];
    const char *fam = o->dns_v6 ? "ip6" : "ip";

    if (o->sandbox_if != NULL)
        snprintf(from, sizeof(from), "iifname \"%s\" ", o->sandbox_if);
    else
        snprintf(from, sizeof(from), "iifname != \"lo\" ");

    emit(b, "table inet vaultgate {\n");
    emit(b, "\t# Packets from the sandbox that matched no allowed path: TCP and the rest dropped,\n"
            "\t# UDP refused with ICMP administratively prohibited.\n");
    emit(b, "\tcounter dropped_forward { }\n\tcounter dropped_input { }\n");
    emit(b, "\tcounter rejected_udp { }\n\n");
    emit(b,
         "\t# Every TCP connection to 80/443 from the sandbox lands on vaultgate, over IPv4\n"
         "\t# and IPv6%s.\n",
         o->dns_redirect != 0 ? ", and so does every DNS packet, whatever address it named" : "");
    emit(b, "\tchain prerouting {\n");
    emit(b, "\t\ttype nat hook prerouting priority -100; policy accept;\n");
    emit(b, "\t\t%stcp dport 443 counter redirect to :%d\n", from, o->https_port);
    emit(b, "\t\t%stcp dport 80 counter redirect to :%d\n", from, o->http_port);
    if (o->dns_redirect != 0) {
        emit(b, "\t\t%sudp dport 53 counter redirect to :%d\n", from, o->dns_redirect);
        emit(b, "\t\t%stcp dport 53 counter redirect to :%d\n", from, o->dns_redirect);
    }
    emit(b, "\t}\n\n");
    emit(b, "\t# The sandbox reaches nothing on this host but the listeners (and DNS); IPv6\n"
            "\t# neighbour discovery is answered, so IPv6 is refused or redirected, never lost.\n");
    emit(b, "\tchain input {\n");
    emit(b, "\t\ttype filter hook input priority filter; policy accept;\n");
    emit(b, "\t\t%sct state established,related accept\n", from);
    emit(b,
         "\t\t%sicmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit } "
         "accept\n",
         from);
    emit(b, "\t\t%stcp dport { %d, %d } ct status dnat accept\n", from, o->https_port,
         o->http_port);
    if (o->dns_redirect != 0)
        emit(b, "\t\t%smeta l4proto { tcp, udp } th dport %d ct status dnat accept\n", from,
             o->dns_redirect);
    if (o->dns[0] != '\0') {
        emit(b, "\t\t%s%s daddr %s udp dport 53 accept\n", from, fam, o->dns);
        emit(b, "\t\t%s%s daddr %s tcp dport 53 accept\n", from, fam, o->dns);
    }
    emit_udp_reject(b, from, "\t\t");
    emit(b, "\t\t%scounter name dropped_input drop\n", from);
    emit(b, "\t}\n\n");
    emit(b, "\t# Nothing from the sandbox is forwarded%s.\n",
         o->dns[0] != '\0' ? " but DNS to the one resolver" : "");
    emit(b, "\tchain forward {\n");
    emit(b, "\t\ttype filter hook forward priority filter; policy accept;\n");
    if (o->dns[0] != '\0') {
        emit(b, "\t\t%s%s daddr %s udp dport 53 accept\n", from, fam, o->dns);
        emit(b, "\t\t%s%s daddr %s tcp dport 53 accept\n", from, fam, o->dns);
    }
    emit_udp_reject(b, from, "\t\t");
    emit(b, "\t\t%scounter name dropped_forward drop\n", from);
    emit(b, "\t}\n}\n");
}

/*
 * Where the sandbox's traffic of family i (0 IPv4, 1 IPv6) is sent: --proxy-ip when it is of
 * that family, else --proxy-ip6 for IPv6; NULL when that family has nowhere to go (and is
 * refused).
 */
static const char *sandbox_target(const struct nft_opts *o, int i)
{
    if (o->proxy_v6 == i)
        return o->proxy_ip;
    if (i == 1 && o->proxy_ip6[0] != '\0')
        return o->proxy_ip6;
    return NULL;
}

/* output_nat's rules for family i: TCP 80/443 (and DNS with --dns-redirect) to the target. */
static void sandbox_nat(struct nft_buf *b, const struct nft_opts *o, int i)
{
    const struct nft_family *f = &nft_families[i];
    const char *t = sandbox_target(o, i), *l = i ? "[" : "", *r = i ? "]" : "";

    if (t == NULL)
        return;
    emit(b, "\t\tmeta nfproto %s tcp dport 443 counter dnat %s to %s%s%s:%d\n", f->nfproto, f->addr,
         l, t, r, o->https_port);
    emit(b, "\t\tmeta nfproto %s tcp dport 80 counter dnat %s to %s%s%s:%d\n", f->nfproto, f->addr,
         l, t, r, o->http_port);
    if (o->dns_redirect == 0)
        return;
    emit(b, "\t\tmeta nfproto %s udp dport 53 counter dnat %s to %s%s%s:%d\n", f->nfproto, f->addr,
         l, t, r, o->dns_redirect);
    emit(b, "\t\tmeta nfproto %s tcp dport 53 counter dnat %s to %s%s%s:%d\n", f->nfproto, f->addr,
         l, t, r, o->dns_redirect);
}

/* output_filter's accepts for family i: the proxy's ports (and, for IPv6, the neighbour
 * discovery that reaching it needs, on the link only). */
static void sandbox_accept(struct nft_buf *b, const struct nft_opts *o, int i)
{
    const struct nft_family *f = &nft_families[i];
    const char *t = sandbox_target(o, i);

    if (t == NULL)
        return;
    if (i == 1)
        emit(b,
             "\t\tip6 daddr { fe80::/10, ff02::/16, %s } icmpv6 type { nd-neighbor-solicit, "
             "nd-neighbor-advert, nd-router-solicit } accept\n",
             t);
    emit(b, "\t\t%s daddr %s tcp dport { %d, %d } accept\n", f->addr, t, o->https_port,
         o->http_port);
    if (o->dns_redirect != 0)
        emit(b, "\t\t%s daddr %s meta l4proto { tcp, udp } th dport %d accept\n", f->addr, t,
             o->dns_redirect);
}

/* A family with nowhere to go is refused at once, so clients fall back to the other. */
static void sandbox_refuse(struct nft_buf *b, const struct nft_opts *o, int i)
{
    const struct nft_family *f = &nft_families[i];

    if (sandbox_target(o, i) != NULL)
        return;
    emit(b,
         "\t\tmeta nfproto %s meta l4proto tcp counter name rejected_%s reject with tcp "
         "reset\n",
         f->nfproto, f->nfproto);
    emit(b, "\t\tmeta nfproto %s counter name rejected_%s reject with %s type admin-prohibited\n",
         f->nfproto, f->nfproto, f->icmp);
}

/* --exempt-uid: every packet of a socket UID owns passes, both families and all protocols,
 * before any DNAT or refusal (vaultgate's own upstream connections and lookups). */
static void sandbox_exempt(struct nft_buf *b, const struct nft_opts *o)
{
    if (o->exempt)
        emit(b, "\t\tmeta skuid %lu counter accept\n", (unsigned long)o->exempt_uid);
}

static void render_sandbox(struct nft_buf *b, const struct nft_opts *o)
{
    const char *dfam = o->dns_v6 ? "ip6" : "ip";

    emit(b, "table inet vaultgate {\n");
    emit(b, "\tcounter dropped_output { }\n\tcounter rejected_udp { }\n");
    for (int i = 0; i < 2; i++)
        if (sandbox_target(o, i) == NULL)
            emit(b, "\tcounter rejected_%s { }\n", nft_families[i].nfproto);
    emit(
        b,
        "\n\t# TCP 80/443%s leaving this namespace go to vaultgate, whatever address they named.\n",
        o->dns_redirect != 0 ? " and DNS" : "");
    if (o->exempt)
        emit(b, "\t# Sockets of uid %lu (vaultgate's own) are neither DNATed nor refused.\n",
             (unsigned long)o->exempt_uid);
    emit(b, "\tchain output_nat {\n");
    emit(b, "\t\ttype nat hook output priority -100; policy accept;\n");
    sandbox_exempt(b, o);
    emit(b, "\t\toifname \"lo\" accept\n");
    sandbox_nat(b, o, 0);
    sandbox_nat(b, o, 1);
    emit(b, "\t}\n\n");
    emit(b, "\t# Everything else leaving this namespace is refused (UDP, and a family with no\n"
            "\t# proxy address) or dropped, and counted.\n");
    emit(b, "\tchain output_filter {\n");
    emit(b, "\t\ttype filter hook output priority filter; policy drop;\n");
    sandbox_exempt(b, o);
    emit(b, "\t\toifname \"lo\" accept\n");
    emit(b, "\t\tct state established,related accept\n");
    sandbox_accept(b, o, 0);
    sandbox_accept(b, o, 1);
    if (o->dns[0] != '\0') {
        emit(b, "\t\t%s daddr %s udp dport 53 accept\n", dfam, o->dns);
        emit(b, "\t\t%s daddr %s tcp dport 53 accept\n", dfam, o->dns);
    }
    emit_udp_reject(b, "", "\t\t");
    sandbox_refuse(b, o, 0);
    sandbox_refuse(b, o, 1);
    emit(b, "\t\tcounter name dropped_output drop\n");
    emit(b, "\t}\n}\n");
}

/*
 * nft's reason in one line: from its first line that carries "Error:" (nft prefixes the input
 * position, "/dev/stdin:1:1-20: Error: ..."; that part goes), else its first non-empty line;
 * control bytes replaced. out is "" when nft said nothing.
 */
static void nft_reason(char *text, char *out, size_t outsz)
{
    char *line = NULL, *p, *nl;
    size_t n = 0;

    for (p = text; *p != '\0'; p = nl + 1) {
        char *err;

        nl = strchr(p, '\n');
        if (nl == NULL)
            nl = p + strlen(p) - 1;
        else
            *nl = '\0';
        if ((err = strstr(p, "Error:")) != NULL) {
            line = strncmp(p, "/dev/stdin:", 11) == 0 ? err : p;
            break;
        }
        if (line == NULL && p[strspn(p, " \t\r")] != '\0')
            line = p;
    }
    for (; line != NULL && line[n] != '\0' && line[n] != '\n' && n + 1 < outsz; n++)
        out[n] = (unsigned char)line[n] < 0x20 || line[n] == 0x7f ? '?' : line[n];
    out[n] = '\0';
}

/* Writes all of text to fd (a pipe; SIGPIPE ignored meanwhile). 0, or -1 when nft stopped
 * reading. */
static int write_all(int fd, const char *text, size_t len)
{
    struct sigaction ign = {.sa_handler = SIG_IGN}, old;
    size_t off = 0;

    sigemptyset(&ign.sa_mask);
    sigaction(SIGPIPE, &ign, &old);
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    sigaction(SIGPIPE, &old, NULL);
    return off == len ? 0 : -1;
}

/*
 * Runs `nft -f -` with text on its stdin and its stderr captured. 0 when nft exits 0; else -1
 * with one line in why that carries nft's own reason (or how it ended).
 */
static int nft_apply(const char *text, size_t len, char *why, size_t whylen)
{
    int in[2] = {-1, -1}, errp[2] = {-1, -1}, status = 0, rc = -1;
    char buf[NFT_STDERR_MAX + 1], reason[256];
    size_t got = 0;
    pid_t pid = -1;

    if (pipe2(in, O_CLOEXEC) != 0 || pipe2(errp, O_CLOEXEC) != 0 || (pid = fork()) < 0) {
        snprintf(why, whylen, "cannot run nft: %s", strerror(errno));
        goto out;
    }
    if (pid == 0) {
        dup2(in[0], STDIN_FILENO);
        dup2(errp[1], STDERR_FILENO);
        execlp("nft", "nft", "-f", "-", (char *)NULL);
        dprintf(STDERR_FILENO, "cannot run nft: %s\n", strerror(errno));
        _exit(127);
    }
    close(in[0]);
    close(errp[1]);
    in[0] = errp[1] = -1;
    /* the ruleset (at most NFT_RULESET_MAX) fits in the pipe: this never waits for nft */
    write_all(in[1], text, len);
    close(in[1]);
    in[1] = -1;
    for (;;) {
        char sink[4096];
        ssize_t r = read(errp[0], got < NFT_STDERR_MAX ? buf + got : sink,
                         got < NFT_STDERR_MAX ? NFT_STDERR_MAX - got : sizeof(sink));

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (got < NFT_STDERR_MAX)
            got += (size_t)r;
    }
    buf[got] = '\0';
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        rc = 0;
        goto out;
    }
    nft_reason(buf, reason, sizeof(reason));
    if (reason[0] != '\0')
        snprintf(why, whylen, "%s", reason);
    else if (WIFSIGNALED(status))
        snprintf(why, whylen, "nft killed by signal %d", WTERMSIG(status));
    else
        snprintf(why, whylen, "nft exited with status %d", WEXITSTATUS(status));
out:
    for (int i = 0; i < 2; i++) {
        if (in[i] >= 0)
            close(in[i]);
        if (errp[i] >= 0)
            close(errp[i]);
    }
    return rc;
}

/* ---- options: each value is checked where it is given ---- */

static int set_where(void *arg, const char *v)
{
    struct nft_opts *o = arg;

    if (strcmp(v, "gateway") != 0 && strcmp(v, "sandbox") != 0)
        return cli_usage_error("nft", "--where: expected gateway or sandbox");
    o->gateway = strcmp(v, "gateway") == 0;
    return 0;
}

/* An address for option opt, kept in canonical form. 0 or EXIT_USAGE. */
static int set_ip(const char *opt, const char *v, char *out, size_t outsz, int *v6)
{
    if (parse_ip(v, out, outsz, v6) != 0)
        return cli_usage_error("nft", "%s: not an IP address", opt);
    return 0;
}

static int set_proxy_ip(void *arg, const char *v)
{
    struct nft_opts *o = arg;

    return set_ip("--proxy-ip", v, o->proxy_ip, sizeof(o->proxy_ip), &o->proxy_v6);
}

static int set_proxy_ip6(void *arg, const char *v)
{
    struct nft_opts *o = arg;
    int v6 = 0;

    if (parse_ip(v, o->proxy_ip6, sizeof(o->proxy_ip6), &v6) != 0 || !v6) {
        o->proxy_ip6[0] = '\0';
        return cli_usage_error("nft", "--proxy-ip6: not an IPv6 address");
    }
    return 0;
}

static int set_dns(void *arg, const char *v)
{
    struct nft_opts *o = arg;

    return set_ip("--dns", v, o->dns, sizeof(o->dns), &o->dns_v6);
}

/* A port for option opt. 0 or EXIT_USAGE. */
static int set_port(const char *opt, const char *v, int *out)
{
    if (parse_port(v, out) != 0)
        return cli_usage_error("nft", "%s: expected a port 1-65535", opt);
    return 0;
}

static int set_https_port(void *arg, const char *v)
{
    return set_port("--https-port", v, &((struct nft_opts *)arg)->https_port);
}

static int set_http_port(void *arg, const char *v)
{
    return set_port("--http-port", v, &((struct nft_opts *)arg)->http_port);
}

static int set_dns_redirect(void *arg, const char *v)
{
    return set_port("--dns-redirect", v, &((struct nft_opts *)arg)->dns_redirect);
}

static int set_sandbox_if(void *arg, const char *v)
{
    struct nft_opts *o = arg;

    if (!valid_ifname(v))
        return cli_usage_error("nft", "--sandbox-if: not an interface name");
    o->sandbox_if = v;
    return 0;
}

/* --exempt-uid: a numeric uid 0-4294967294, or a user name looked up now (the ruleset holds
 * the number). */
static int set_exempt_uid(void *arg, const char *v)
{
    struct nft_opts *o = arg;
    const struct passwd *pw;
    unsigned long long n;
    char *end;

    if (*v != '\0' && strspn(v, "0123456789") == strlen(v)) {
        errno = 0;
        n = strtoull(v, &end, 10);
        if (errno != 0 || *end != '\0' || n > 4294967294ULL)
            return cli_usage_error("nft", "--exempt-uid: expected a uid 0-4294967294 or a "
                                          "user name");
        o->exempt_uid = (uid_t)n;
    } else {
        pw = *v != '\0' ? getpwnam(v) : NULL;
        if (pw == NULL)
            return cli_usage_error("nft", "--exempt-uid: no such user '%s'", v);
        o->exempt_uid = pw->pw_uid;
    }
    o->exempt = 1;
    return 0;
}

static const struct cli_opt nft_table[] = {
    {"--vault", CLI_STR, .off = offsetof(struct nft_opts, vault)},
    {"--where", CLI_SET, .set = set_where},
    {"--proxy-ip", CLI_SET, .set = set_proxy_ip},
    {"--proxy-ip6", CLI_SET, .set = set_proxy_ip6},
    {"--https-port", CLI_SET, .set = set_https_port},
    {"--http-port", CLI_SET, .set = set_http_port},
    {"--dns", CLI_SET, .set = set_dns},
    {"--dns-redirect", CLI_SET, .set = set_dns_redirect},
    {"--sandbox-if", CLI_SET, .set = set_sandbox_if},
    {"--exempt-uid", CLI_SET, .set = set_exempt_uid},
    {"--apply", CLI_FLAG, .off = offsetof(struct nft_opts, apply)},
    {0},
};

/* 0 to go on, or -1 with *rc (EXIT_OK after --help). */
static int parse_opts(int argc, char **argv, struct nft_opts *o, int *rc)
{
    static const struct cli_words words = {.whole = true};
    static const struct cli_spec spec = {"nft", nft_table, usage, NULL, &words};

    if (cli_parse(&spec, argc, argv, o, rc) < 0)
        return -1;
    if (o->vault == NULL)
        *rc = cli_usage_error("nft", "--vault is required");
    else if (!o->gateway && o->proxy_ip[0] == '\0')
        *rc = cli_usage_error("nft", "--where sandbox needs --proxy-ip");
    else if (o->dns[0] != '\0' && o->dns_redirect != 0)
        *rc = cli_usage_error("nft", "--dns and --dns-redirect: give one of them");
    else if (o->gateway && o->proxy_ip6[0] != '\0')
        *rc = cli_usage_error("nft", "--proxy-ip6: only with --where sandbox (the gateway "
                                     "redirects IPv6 as it is)");
    else if (o->gateway && o->exempt)
        *rc = cli_usage_error("nft", "--exempt-uid: only with --where sandbox (the gateway "
                                     "tells the sandbox's traffic by its interface)");
    else if (o->proxy_v6 && o->proxy_ip6[0] != '\0')
        *rc = cli_usage_error("nft", "--proxy-ip6: --proxy-ip is already IPv6");
    else
        return 0;
    return -1;
}

int cmd_nft(int argc, char **argv)
{
    struct nft_opts o = {.gateway = 1, .https_port = 8443, .http_port = 8080};
    struct nft_buf *b = NULL;
    struct policy *p = NULL;
    char err[512], why[320];
    const char *reason = NULL;
    enum policy_mode mode;
    int rc;

    if (parse_opts(argc, argv, &o, &rc) < 0)
        return rc;
    p = policy_load_unread(o.vault, err, sizeof(err));
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
    /* a failed --apply is one line on stderr (SPEC §9): the note comes after, only on success */
    if (o.apply && nft_apply(b->text, b->len, why, sizeof(why)) != 0) {
        fprintf(stderr, "vaultgate nft: the ruleset is not installed: nft -f -: %s\n", why);
        rc = EXIT_ENFORCE;
        goto out;
    }
    if (mode == POLICY_MODE_DEFAULT)
        fprintf(stderr, "vaultgate nft: note: the vault needs only default routing; catch-all "
                        "routing enforces it all the same\n");
    else if (o.dns[0] != '\0')
        fprintf(stderr,
                "vaultgate nft: warning: DNS to %s can carry data out of the sandbox (the names "
                "it looks up reach whoever serves their zones); --dns-redirect PORT keeps DNS "
                "on vaultgate\n",
                o.dns);
    if (!o.apply) {
        fwrite(b->text, 1, b->len, stdout);
        rc = EXIT_OK;
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
