/*
 * modules.h - the modules a run's workers carry (struct worker_module), in the order their
 * hooks run: ingress (TLS, plain-HTTP and explicit-proxy listeners) and the HTTP/1.1
 * transport's spares, the DNS listener, the exchange, the HTTP/2 upstream sessions.
 */
#ifndef VG_MODULES_H
#define VG_MODULES_H

#include <stddef.h>

struct worker_shared;

/* Registers every module for the workers sh will start (before worker_start_all). 0, or -1 +
 * err. */
int modules_register(struct worker_shared *sh, char *err, size_t errlen);

#endif
