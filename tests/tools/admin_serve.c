/*
 * admin_serve.c - runs admin.c alone, with fake ops, for the integration cases.
 *
 * admin_serve ADDR [--audit URL] [--run ID] [--ready-file PATH] [--no-ca]
 *     starts the admin API on ADDR (port 0 picks a free port), prints "listening <address>"
 *     and serves until stdin reaches EOF; exit 0, or 4 when it cannot bind.
 *     /readyz is 200 while PATH exists (always, without --ready-file).
 * admin_serve --check ADDR [--allow-remote]
 *     only the --admin usage check of `vaultgate run`: exit 0, or 2 with the reason on stderr.
 */
#include "audit/audit.h"
#include "proxy/admin.h"
#include "proxy/metrics.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FAKE_CA_PEM                                                                                \
    "-----BEGIN CERTIFICATE-----\nMIIBfakefakefakefakefakefakefakefakefakefakefake\n"              \
    "-----END CERTIFICATE-----\n"

struct fake {
    const char *ready_file;
    const char *run;
};

static void fake_status(void *arg, cJSON *obj)
{
    struct fake *f = arg;
    cJSON *run = cJSON_AddObjectToObject(obj, "run");

    cJSON_AddStringToObject(obj, "version", "test");
    cJSON_AddStringToObject(run, "id", f->run != NULL ? f->run : "run-test");
    cJSON_AddStringToObject(run, "user", "u-test");
    cJSON_AddStringToObject(obj, "mode", "default");
}

static int fake_ready(void *arg)
{
    struct fake *f = arg;

    return f->ready_file == NULL || access(f->ready_file, F_OK) == 0;
}

static void fake_extra(void *arg, void *extra)
{
    struct metrics_extra *e = extra;

    e->cert_cache_hits = 7;
    e->cert_cache_misses = 3;
}

static int usage(void)
{
    fprintf(stderr, "usage: admin_serve ADDR [--audit URL] [--run ID] [--ready-file PATH] "
                    "[--no-ca] | admin_serve --check ADDR [--allow-remote]\n");
    return 2;
}

int main(int argc, char **argv)
{
    struct fake f = {NULL, NULL};
    struct admin_ops ops = {
        fake_status, fake_ready, fake_extra, &f, FAKE_CA_PEM, sizeof(FAKE_CA_PEM) - 1, "off", NULL};
    const char *addr = NULL;
    bool check = false, allow_remote = false;
    struct admin *ad;
    char err[512], buf[256];

    /* as in vaultgate run: a client that goes away must not kill the server */
    signal(SIGPIPE, SIG_IGN);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--check") == 0)
            check = true;
        else if (strcmp(argv[i], "--allow-remote") == 0)
            allow_remote = true;
        else if (strcmp(argv[i], "--no-ca") == 0)
            ops.ca_pem = NULL;
        else if (strcmp(argv[i], "--audit") == 0 && i + 1 < argc)
            ops.audit_url = argv[++i];
        else if (strcmp(argv[i], "--run") == 0 && i + 1 < argc)
            f.run = ops.run_id = argv[++i];
        else if (strcmp(argv[i], "--ready-file") == 0 && i + 1 < argc)
            f.ready_file = argv[++i];
        else if (addr == NULL && argv[i][0] != '-')
            addr = argv[i];
        else
            return usage();
    }
    if (addr == NULL)
        return usage();
    if (check) {
        if (admin_addr_check(addr, allow_remote, err, sizeof(err)) < 0) {
            fprintf(stderr, "admin_serve: %s\n", err);
            return 2;
        }
        return 0;
    }
    if (metrics_init(2) < 0)
        return 1;
    metrics_request(0, METRICS_D_INJECT, 200, 0.02);
    metrics_request(1, METRICS_D_BLOCK, 403, 0.001);
    metrics_blocked(1);
    metrics_injection(0, "OPENAI_API_KEY");
    metrics_conn_open(0);
    ad = admin_open(addr, &ops, err, sizeof(err));
    if (ad == NULL || admin_serve(ad, err, sizeof(err)) < 0) {
        admin_stop(&ad);
        fprintf(stderr, "admin_serve: %s\n", err);
        metrics_shutdown();
        return 4;
    }
    printf("listening %s\n", admin_address(ad));
    fflush(stdout);
    while (fgets(buf, sizeof(buf), stdin) != NULL)
        ;
    admin_stop(&ad);
    metrics_shutdown();
    return 0;
}
