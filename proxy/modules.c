/*
 * modules.c - the one list of the modules a run's workers carry (see modules.h). worker.c
 * names none of them; a new listener kind or a module with per-worker state is one row here.
 * Their init and hooks run in this order, their free in the reverse one: the HTTP/2 upstream
 * sessions go first (after the spare HTTP/2 streams, which hold nothing of theirs), then the
 * exchanges' maskers, the spare origins after both, the server TLS context last.
 */
#include "proxy/modules.h"
#include "proxy/dns.h"
#include "proxy/exchange.h"
#include "proxy/h1conn.h"
#include "proxy/h2conn.h"
#include "proxy/h2up.h"
#include "proxy/ingress.h"
#include "proxy/origin.h"
#include "proxy/worker.h"

#include <stdio.h>

static const struct worker_module *const modules[] = {
    &ingress_worker_module,  &h1conn_worker_module,   &h1timer_worker_module,
    &dns_worker_module,      &origin_worker_module,   &exchange_spares_module,
    &exchange_timers_module, &exchange_masks_module,  &exchange_tokens_module,
    &h2up_worker_module,     &h2stream_worker_module,
};

int modules_register(struct worker_shared *sh, char *err, size_t errlen)
{
    for (size_t i = 0; i < sizeof(modules) / sizeof(modules[0]); i++) {
        if (worker_module_add(sh, modules[i]) < 0) {
            snprintf(err, errlen, "module %s: more than %d modules", modules[i]->name,
                     WORKER_MODULES_MAX);
            return -1;
        }
    }
    return 0;
}
