/*
 * signals.c - the signal table of `vaultgate run` (SPEC §8; docs/operations.md, "Signals").
 *
 * Guarantees: every signal whose default action would end the process is taken here, except
 * the faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT: the process state is
 * not to be trusted then, and blocking them would only turn a fault into a forced kill without
 * the sanitizers' report) and SIGKILL/SIGSTOP, which nothing can take. Each taken signal either
 * stops cleanly, reloads, or is logged and ignored; SIGPIPE is ignored outright by the caller.
 */
#include "cli/signals.h"

#include <stdio.h>
#include <string.h>

static const struct {
    int sig;
    const char *name;
    enum signals_action action;
} table[] = {
    {SIGTERM, "SIGTERM", SIGNALS_STOP},
    {SIGINT, "SIGINT", SIGNALS_STOP},
    {SIGQUIT, "SIGQUIT", SIGNALS_STOP},
    /* the kernel at the soft RLIMIT_CPU (SIGKILL follows at the hard one) */
    {SIGXCPU, "SIGXCPU", SIGNALS_STOP},
    /* power failing: a UPS daemon or init asks for a shutdown */
    {SIGPWR, "SIGPWR", SIGNALS_STOP},
    {SIGHUP, "SIGHUP", SIGNALS_RELOAD},
    /* logrotate's postrotate habit: the log is stderr, there is nothing to reopen */
    {SIGUSR1, "SIGUSR1", SIGNALS_IGNORE},
    {SIGUSR2, "SIGUSR2", SIGNALS_IGNORE},
    /* timers vaultgate never sets: only a stray kill sends these */
    {SIGALRM, "SIGALRM", SIGNALS_IGNORE},
    {SIGVTALRM, "SIGVTALRM", SIGNALS_IGNORE},
    {SIGPROF, "SIGPROF", SIGNALS_IGNORE},
    /* a write past RLIMIT_FSIZE fails with EFBIG instead; the audit store keeps its counts */
    {SIGXFSZ, "SIGXFSZ", SIGNALS_IGNORE},
    /* blocked, a background write to the terminal goes through (a read would get EIO) */
    {SIGTTIN, "SIGTTIN", SIGNALS_IGNORE},
    {SIGTTOU, "SIGTTOU", SIGNALS_IGNORE},
    {SIGSTKFLT, "SIGSTKFLT", SIGNALS_IGNORE},
    /* no descriptor is in O_ASYNC mode */
    {SIGIO, "SIGIO", SIGNALS_IGNORE},
};

void signals_run_set(sigset_t *set)
{
    sigemptyset(set);
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        sigaddset(set, table[i].sig);
    /* real-time signals: nothing in vaultgate uses one */
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        sigaddset(set, sig);
}

enum signals_action signals_action(int sig)
{
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].sig == sig)
            return table[i].action;
    }
    return SIGNALS_IGNORE;
}

const char *signals_name(int sig, char *buf, size_t len)
{
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (table[i].sig == sig) {
            snprintf(buf, len, "%s", table[i].name);
            return buf;
        }
    }
    if (sig == SIGRTMIN)
        snprintf(buf, len, "SIGRTMIN");
    else if (sig > SIGRTMIN && sig <= SIGRTMAX)
        snprintf(buf, len, "SIGRTMIN+%d", sig - SIGRTMIN);
    else
        snprintf(buf, len, "signal %d", sig);
    return buf;
}
