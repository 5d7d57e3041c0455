/*
 * signals.h - what `vaultgate run` does with each signal (SPEC §8).
 *
 * The main thread blocks signals_run_set() in every thread before the first one starts and
 * takes them with sigwaitinfo(); signals_action() says what each one means. No catchable signal
 * that is not a fault ends the process without the clean stop (drain, audit flush, exit 0).
 */
#ifndef VG_SIGNALS_H
#define VG_SIGNALS_H

#include <signal.h>
#include <stddef.h>

enum signals_action {
    SIGNALS_STOP = 0, /* stop cleanly: drain, flush the audit store, exit 0 */
    SIGNALS_RELOAD,   /* re-read the vault */
    SIGNALS_IGNORE,   /* log a line and carry on */
};

/* Every signal the main thread takes (all of them have an action below). */
void signals_run_set(sigset_t *set);

/* The action for sig, one of signals_run_set(); SIGNALS_IGNORE for any other. */
enum signals_action signals_action(int sig);

/* "SIGUSR1", "SIGRTMIN+3", or "signal 99" in buf (at least 16 bytes). Returns buf. */
const char *signals_name(int sig, char *buf, size_t len);

#endif
