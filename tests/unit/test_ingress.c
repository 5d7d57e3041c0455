/*
 * test_ingress.c - what ingress decides without a socket (proxy/ingress.c): the transport ALPN
 * picks, and the run's module list (proxy/modules.c): every listener kind accepted by exactly
 * one module, ingress's kinds by ingress.
 */
#include <check.h>
#include <string.h>

#include "proxy/dns.h"
#include "proxy/ingress.h"
#include "proxy/listen.h"
#include "proxy/modules.h"
#include "proxy/worker.h"

static const struct {
    const char *alpn; /* the protocol the handshake selected; "" = no ALPN */
    const char *transport;
} alpn_cases[] = {
    {"h2", "h2"},
    {"http/1.1", "http/1.1"},
    {"", "http/1.1"},
    {"h2c", "http/1.1"},      /* cleartext HTTP/2's name is not ours on TLS */
    {"h", "http/1.1"},        /* a prefix of h2 */
    {"h3", "http/1.1"},       /* nothing else is spoken */
    {"http/1.0", "http/1.1"}, /* HTTP/1.0 clients are served by the HTTP/1.1 transport */
    {"H2", "http/1.1"},       /* ALPN names are compared byte for byte (RFC 7301 §3.1) */
};

START_TEST(test_alpn_transport)
{
    const char *a = alpn_cases[_i].alpn;

    ck_assert_str_eq(ingress_transport((const unsigned char *)a, (unsigned)strlen(a)),
                     alpn_cases[_i].transport);
}
END_TEST

/* A selected protocol is a length and bytes, not a string: a NUL inside does not match "h2". */
START_TEST(test_alpn_not_a_string)
{
    ck_assert_str_eq(ingress_transport((const unsigned char *)"h2\0", 3), "http/1.1");
    ck_assert_str_eq(ingress_transport((const unsigned char *)"h2x", 2), "h2");
}
END_TEST

START_TEST(test_modules_claim_every_kind)
{
    static struct worker_shared sh;
    const enum listen_kind kinds[] = {LISTEN_HTTPS, LISTEN_HTTP, LISTEN_PROXY, LISTEN_DNS};
    char err[128] = "";
    size_t n0;

    memset(&sh, 0, sizeof(sh));
    ck_assert_int_eq(modules_register(&sh, err, sizeof(err)), 0);
    n0 = sh.nmodules;
    ck_assert_uint_ge(n0, 2);
    ck_assert_ptr_eq(sh.modules[0], &ingress_worker_module); /* its init makes the TLS context */
    for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
        const struct worker_module *by = NULL;
        int n = 0;

        for (size_t i = 0; i < sh.nmodules; i++) {
            if ((sh.modules[i]->accepts & (1u << kinds[k])) != 0) {
                ck_assert(sh.modules[i]->accept != NULL);
                by = sh.modules[i];
                n++;
            }
        }
        ck_assert_int_eq(n, 1);
        ck_assert_ptr_eq(by, kinds[k] == LISTEN_DNS ? &dns_worker_module : &ingress_worker_module);
    }
    /* registering the list again changes nothing */
    ck_assert_int_eq(modules_register(&sh, err, sizeof(err)), 0);
    ck_assert_uint_eq(sh.nmodules, n0);
}
END_TEST

Suite *suite_ingress(void);

Suite *suite_ingress(void)
{
    Suite *s = suite_create("ingress");
    TCase *tc = tcase_create("ingress");

    tcase_add_loop_test(tc, test_alpn_transport, 0, sizeof(alpn_cases) / sizeof(alpn_cases[0]));
    tcase_add_test(tc, test_alpn_not_a_string);
    tcase_add_test(tc, test_modules_claim_every_kind);
    suite_add_tcase(s, tc);
    return s;
}
