/*
 * run_opts.h - the options of `vaultgate run` (SPEC §2): parsed, given their defaults and
 * checked as a whole before anything is set up. Shared by cli/run_opts.c, which fills them, and
 * cli/cmd_run.c, which starts the gateway from them; nothing else includes it.
 */
#ifndef VG_RUN_OPTS_H
#define VG_RUN_OPTS_H

#include <stdbool.h>
#include <stdio.h>

#include "cli/cli.h"
#include "common/timeouts.h"
#include "proxy/dns.h"
#include "proxy/upstream.h"
#include "proxy/worker.h"

#define RUN_CMD      "run"
#define RUN_PATH_MAX 4096

struct run_opts {
    const char *vault;
    struct cli_list https, http, proxy, resolve, dns, allow_private, listen_dns;
    const char *admin;
    const char *ca_out;
    const char *trust_out;
    const char *state_dir;
    char state_dir_env[RUN_PATH_MAX]; /* the first of $STATE_DIRECTORY, when that is the default */
    bool vault_watch;
    bool admin_allow_remote;
    const char *audit;
    int audit_source; /* enum audit_source */
    const char *upstream_ca;
    const char *upstream_proxy;
    int threads;
    const char *user;
    double vault_wait;
    int max_conns; /* 0: from RLIMIT_NOFILE */
    int log_level; /* enum log_level */
    bool http_none;
    struct vg_timeouts timeouts;
    struct dns_answers dns_answers; /* --dns-answer */
};

void run_opts_usage(FILE *out);

/*
 * Parses argv into o (zeroed, log_level set, by the caller), fills the defaults and checks the
 * whole set; fills sh's listener addresses, DNS answers and timeouts and the upstream side uc
 * (sh->addrs is the caller's to free). 0, or the exit code after one line naming the option.
 */
int run_opts_parse(int argc, char **argv, struct run_opts *o, struct worker_shared *sh,
                   struct upstream_config *uc);

#endif
