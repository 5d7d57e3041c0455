/*
 * test_cmd_nft.c - `vaultgate nft` (cli/cmd_nft.c) without nft: the rulesets it prints for each
 * combination of --where, --dns-redirect, --dns, --proxy-ip6 and --exempt-uid (the lines that must
 * be there and the ones that must not), the one-line usage errors of the combinations it refuses,
 * and the warning about --dns for a catch-all vault. tests/integration/cases/test_nft_rulesets.py
 * has the real nft check each combination.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

#define OUT_MAX (16 * 1024)

struct nft_run {
    int rc;
    char out[OUT_MAX], err[2048];
};

static char dir[] = "/tmp/vg-nft-XXXXXX";
static char catchall[64], defvault[64];

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void setup(void)
{
    static const char head[] = "{\"version\": 1, \"run\": {\"id\": \"run-nft-u\", \"user\": \"u\"},"
                               "\"secrets\": {\"K\": {\"value\": \"sk-canary-nft-unit-0001\"}},"
                               "\"rules\": [{\"host_pattern\": \"api.example.test\", \"secret\": "
                               "\"K\", \"scheme\": \"bearer\"}], \"host_policy\": {\"default\": ";
    char text[512];

    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(catchall, sizeof(catchall), "%s/catchall.json", dir);
    snprintf(defvault, sizeof(defvault), "%s/default.json", dir);
    snprintf(text, sizeof(text), "%s\"block\"}}", head);
    write_file(catchall, text);
    snprintf(text, sizeof(text), "%s\"allow\"}}", head);
    write_file(defvault, text);
}

static void teardown(void)
{
    unlink(catchall);
    unlink(defvault);
    rmdir(dir);
}

static void slurp(FILE *f, char *buf, size_t len)
{
    size_t n;

    rewind(f);
    n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

/* cmd_nft on words (NULL-terminated; "--vault" and the vault first) with stdout and stderr
 * captured. */
static void run(struct nft_run *r, const char *vault, const char *const *words)
{
    char *argv[24] = {"nft", "--vault", (char *)vault};
    int argc = 3, so, se;
    FILE *out = tmpfile(), *err = tmpfile();

    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(err);
    for (; words[argc - 3] != NULL; argc++)
        argv[argc] = (char *)words[argc - 3];
    fflush(stdout);
    fflush(stderr);
    so = dup(STDOUT_FILENO);
    se = dup(STDERR_FILENO);
    dup2(fileno(out), STDOUT_FILENO);
    dup2(fileno(err), STDERR_FILENO);
    r->rc = cmd_nft(argc, argv);
    fflush(stdout);
    fflush(stderr);
    dup2(so, STDOUT_FILENO);
    dup2(se, STDERR_FILENO);
    close(so);
    close(se);
    slurp(out, r->out, sizeof(r->out));
    slurp(err, r->err, sizeof(r->err));
}

struct render_case {
    const char *words[14];
    const char *want[10];  /* lines (or parts of one) the ruleset has */
    const char *absent[6]; /* and ones it must not have */
};

#define SB "iifname \"vsb0\" "
#define REJ4                                                                                       \
    "meta nfproto ipv4 meta l4proto udp counter name rejected_udp reject with icmp type "          \
    "admin-prohibited\n"
#define REJ6                                                                                       \
    "meta nfproto ipv6 meta l4proto udp counter name rejected_udp reject with icmpv6 "             \
    "type admin-prohibited\n"

static const struct render_case renders[] = {
    /* gateway with --dns-redirect: DNS of both transports to the listener, UDP refused in both
     * chains, IPv6 neighbour discovery answered */
    {{"--sandbox-if", "vsb0", "--dns-redirect", "5353", NULL},
     {"\t\t" SB "udp dport 53 counter redirect to :5353\n",
      "\t\t" SB "tcp dport 53 counter redirect to :5353\n",
      "\t\t" SB "meta l4proto { tcp, udp } th dport 5353 ct status dnat accept\n",
      "\t\t" SB "icmpv6 type { nd-neighbor-solicit, nd-neighbor-advert, nd-router-solicit } accept",
      "\tcounter rejected_udp { }\n",
      "\t\t" SB REJ4 "\t\t" SB REJ6 "\t\t" SB "counter name dropped_input drop\n",
      "\t\t" SB REJ4 "\t\t" SB REJ6 "\t\t" SB "counter name dropped_forward drop\n",
      "\t\t" SB "tcp dport 443 counter redirect to :8443\n"},
     {"daddr", "dnat ip", "rejected_ipv6"}},
    /* gateway with --dns: forwarded to that resolver only, and no redirect of DNS */
    {{"--dns", "10.9.9.53", NULL},
     {"iifname != \"lo\" ip daddr 10.9.9.53 udp dport 53 accept\n",
      "iifname != \"lo\" ip daddr 10.9.9.53 tcp dport 53 accept\n", "iifname != \"lo\" " REJ4},
     {"dport 53 counter redirect", "th dport"}},
    /* sandbox, IPv4 proxy only: DNS DNATed, IPv6 refused (TCP reset, ICMPv6 otherwise) */
    {{"--where", "sandbox", "--proxy-ip", "10.9.9.1", "--dns-redirect", "53", NULL},
     {"\t\tmeta nfproto ipv4 udp dport 53 counter dnat ip to 10.9.9.1:53\n",
      "\t\tmeta nfproto ipv4 tcp dport 53 counter dnat ip to 10.9.9.1:53\n",
      "\t\tip daddr 10.9.9.1 meta l4proto { tcp, udp } th dport 53 accept\n",
      "\t\t" REJ4 "\t\t" REJ6
      "\t\tmeta nfproto ipv6 meta l4proto tcp counter name rejected_ipv6 reject with tcp reset\n"
      "\t\tmeta nfproto ipv6 counter name rejected_ipv6 reject with icmpv6 type "
      "admin-prohibited\n\t\tcounter name dropped_output drop\n",
      "\tcounter rejected_ipv6 { }\n"},
     {"dnat ip6", "rejected_ipv4", "icmpv6 type { nd"}},
    /* sandbox with --proxy-ip6: IPv6 TCP 80/443 and DNS DNATed there, its neighbour discovery
     * on the link passes, nothing refused by family */
    {{"--where", "sandbox", "--proxy-ip", "10.9.9.1", "--proxy-ip6", "FD00:0::1", "--dns-redirect",
      "5353", NULL},
     {"\t\tmeta nfproto ipv6 tcp dport 443 counter dnat ip6 to [fd00::1]:8443\n",
      "\t\tmeta nfproto ipv6 tcp dport 80 counter dnat ip6 to [fd00::1]:8080\n",
      "\t\tmeta nfproto ipv6 udp dport 53 counter dnat ip6 to [fd00::1]:5353\n",
      "\t\tmeta nfproto ipv6 tcp dport 53 counter dnat ip6 to [fd00::1]:5353\n",
      "\t\tmeta nfproto ipv4 tcp dport 443 counter dnat ip to 10.9.9.1:8443\n",
      "\t\tip6 daddr fd00::1 meta l4proto { tcp, udp } th dport 5353 accept\n",
      "\t\tip6 daddr { fe80::/10, ff02::/16, fd00::1 } icmpv6 type { nd-neighbor-solicit, "
      "nd-neighbor-advert, nd-router-solicit } accept\n",
      "\t\t" REJ6},
     {"rejected_ipv6", "rejected_ipv4"}},
    /* sandbox with an IPv6 --proxy-ip: IPv4 is the family refused */
    {{"--where", "sandbox", "--proxy-ip", "fd00::1", NULL},
     {"dnat ip6 to [fd00::1]:8443",
      "\t\tmeta nfproto ipv4 meta l4proto tcp counter name rejected_ipv4 reject with tcp reset\n",
      "\t\tmeta nfproto ipv4 counter name rejected_ipv4 reject with icmp type admin-prohibited\n"},
     {"dnat ip ", "rejected_ipv6", "dport 53"}},
    /* sandbox without DNS: no DNS passes, UDP 53 is refused like all UDP */
    {{"--where", "sandbox", "--proxy-ip", "10.9.9.1", NULL},
     {"\t\t" REJ4, "\tcounter rejected_udp { }\n"},
     {"dport 53", "skuid"}},
    /* the sidecar: vaultgate's uid passes first in both chains (before the loopback accept,
     * every DNAT and every refusal); everyone else's 80/443 and DNS go to it on loopback */
    {{"--where", "sandbox", "--proxy-ip", "127.0.0.1", "--https-port", "443", "--http-port", "80",
      "--dns-redirect", "53", "--exempt-uid", "65532", NULL},
     {"\t# Sockets of uid 65532 (vaultgate's own) are neither DNATed nor refused.\n",
      "\t\ttype nat hook output priority -100; policy accept;\n"
      "\t\tmeta skuid 65532 counter accept\n\t\toifname \"lo\" accept\n"
      "\t\tmeta nfproto ipv4 tcp dport 443 counter dnat ip to 127.0.0.1:443\n"
      "\t\tmeta nfproto ipv4 tcp dport 80 counter dnat ip to 127.0.0.1:80\n"
      "\t\tmeta nfproto ipv4 udp dport 53 counter dnat ip to 127.0.0.1:53\n",
      "\t\ttype filter hook output priority filter; policy drop;\n"
      "\t\tmeta skuid 65532 counter accept\n\t\toifname \"lo\" accept\n",
      "\t\t" REJ4, "counter name rejected_ipv6 reject with tcp reset\n"},
     {"dnat ip6"}},
    /* a user name is looked up when the ruleset is rendered: the ruleset holds the number */
    {{"--where", "sandbox", "--proxy-ip", "fd00::1", "--exempt-uid", "root", NULL},
     {"\t# Sockets of uid 0 (vaultgate's own) are neither DNATed nor refused.\n",
      "\t\ttype filter hook output priority filter; policy drop;\n\t\tmeta skuid 0 counter "
      "accept\n",
      "\t\tmeta skuid 0 counter accept\n\t\toifname \"lo\" accept\n\t\tmeta nfproto ipv6 tcp "
      "dport 443 counter dnat ip6 to [fd00::1]:8443\n"},
     {"root"}},
};

START_TEST(renders_each_combination)
{
    const struct render_case *c = &renders[_i];
    struct nft_run *r = calloc(1, sizeof(*r));

    ck_assert_ptr_nonnull(r);
    run(r, catchall, c->words);
    ck_assert_msg(r->rc == EXIT_OK, "rc %d: %s", r->rc, r->err);
    for (size_t i = 0; i < sizeof(c->want) / sizeof(c->want[0]) && c->want[i] != NULL; i++)
        ck_assert_msg(strstr(r->out, c->want[i]) != NULL, "case %d lacks %s\n%s", _i, c->want[i],
                      r->out);
    for (size_t i = 0; i < sizeof(c->absent) / sizeof(c->absent[0]) && c->absent[i] != NULL; i++)
        ck_assert_msg(strstr(r->out, c->absent[i]) == NULL, "case %d has %s\n%s", _i, c->absent[i],
                      r->out);
    ck_assert_ptr_null(strstr(r->out, "sk-canary"));
    free(r);
}
END_TEST

struct usage_case {
    const char *words[10];
    const char *msg;
};

static const struct usage_case usages[] = {
    {{"--dns", "10.0.0.53", "--dns-redirect", "5353", NULL},
     "--dns and --dns-redirect: give one of them"},
    {{"--dns-redirect", "0", NULL}, "--dns-redirect: expected a port 1-65535"},
    {{"--dns-redirect", "65536", NULL}, "--dns-redirect: expected a port 1-65535"},
    {{"--dns-redirect", "53x", NULL}, "--dns-redirect: expected a port 1-65535"},
    {{"--where", "sandbox", "--proxy-ip", "10.0.0.1", "--proxy-ip6", "10.0.0.2", NULL},
     "--proxy-ip6: not an IPv6 address"},
    {{"--where", "sandbox", "--proxy-ip", "fd00::1", "--proxy-ip6", "fd00::2", NULL},
     "--proxy-ip6: --proxy-ip is already IPv6"},
    {{"--proxy-ip6", "fd00::2", NULL}, "--proxy-ip6: only with --where sandbox"},
    {{"--exempt-uid", "65532", NULL}, "--exempt-uid: only with --where sandbox"},
    {{"--where", "gateway", "--exempt-uid", "root", NULL},
     "--exempt-uid: only with --where sandbox"},
    {{"--where", "sandbox", "--proxy-ip", "10.0.0.1", "--exempt-uid", "4294967295", NULL},
     "--exempt-uid: expected a uid 0-4294967294 or a user name"},
    {{"--where", "sandbox", "--proxy-ip", "10.0.0.1", "--exempt-uid", "99999999999999999999999",
      NULL},
     "--exempt-uid: expected a uid 0-4294967294 or a user name"},
    {{"--where", "sandbox", "--proxy-ip", "10.0.0.1", "--exempt-uid", "no-such-user-vg21", NULL},
     "--exempt-uid: no such user 'no-such-user-vg21'"},
    {{"--where", "sandbox", "--proxy-ip", "10.0.0.1", "--exempt-uid", "-1", NULL},
     "--exempt-uid: no such user '-1'"},
};

START_TEST(refuses_combinations)
{
    const struct usage_case *c = &usages[_i];
    struct nft_run *r = calloc(1, sizeof(*r));
    char *nl;

    ck_assert_ptr_nonnull(r);
    run(r, catchall, c->words);
    ck_assert_msg(r->rc == EXIT_USAGE, "case %d: rc %d", _i, r->rc);
    ck_assert_msg(strstr(r->err, c->msg) != NULL, "case %d: %s", _i, r->err);
    nl = strchr(r->err, '\n');
    ck_assert_msg(nl != NULL && nl[1] == '\0', "case %d: not one line: %s", _i, r->err);
    ck_assert_str_eq(r->out, "");
    free(r);
}
END_TEST

/* --dns for a catch-all vault: the ruleset as asked, exit 0, and one warning naming the fix;
 * --dns-redirect and a default-routing vault get none. */
START_TEST(warns_about_dns)
{
    static const char *const dns[] = {"--dns", "10.0.0.53", NULL};
    static const char *const redirect[] = {"--dns-redirect", "5353", NULL};
    struct nft_run *r = calloc(1, sizeof(*r));

    ck_assert_ptr_nonnull(r);
    run(r, catchall, dns);
    ck_assert_int_eq(r->rc, EXIT_OK);
    ck_assert_str_eq(r->err, "vaultgate nft: warning: DNS to 10.0.0.53 can carry data out of the "
                             "sandbox (the names it looks up reach whoever serves their zones); "
                             "--dns-redirect PORT keeps DNS on vaultgate\n");
    ck_assert_ptr_nonnull(strstr(r->out, "ip daddr 10.0.0.53 udp dport 53 accept"));
    run(r, catchall, redirect);
    ck_assert_int_eq(r->rc, EXIT_OK);
    ck_assert_str_eq(r->err, "");
    run(r, defvault, dns);
    ck_assert_int_eq(r->rc, EXIT_OK);
    ck_assert_ptr_null(strstr(r->err, "warning"));
    free(r);
}
END_TEST

Suite *suite_cmd_nft(void);

Suite *suite_cmd_nft(void)
{
    Suite *s = suite_create("cmd_nft");
    TCase *tc = tcase_create("core");

    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, renders_each_combination, 0,
                        (int)(sizeof(renders) / sizeof(renders[0])));
    tcase_add_loop_test(tc, refuses_combinations, 0, (int)(sizeof(usages) / sizeof(usages[0])));
    tcase_add_test(tc, warns_about_dns);
    suite_add_tcase(s, tc);
    return s;
}
