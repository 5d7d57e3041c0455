/*
 * test_signals.c - the signal table of `vaultgate run` (cli/signals.c): every signal whose
 * default action ends the process is taken, faults and the uncatchable aside; the actions of
 * SPEC §8; the names in log lines.
 */
#include <check.h>
#include <signal.h>
#include <string.h>

#include "cli/signals.h"

/* Default action "ignore", "stop" or "continue": never ends the process, so not taken. */
static int harmless(int sig)
{
    return sig == SIGCHLD || sig == SIGCONT || sig == SIGURG || sig == SIGWINCH || sig == SIGTSTP ||
           sig == SIGSTOP;
}

/* Faults (the process state is not to be trusted) and SIGKILL: left to their defaults. */
static int left_alone(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL || sig == SIGTRAP ||
           sig == SIGSYS || sig == SIGABRT || sig == SIGKILL || sig == SIGPIPE;
}

START_TEST(test_every_ending_signal_is_taken)
{
    sigset_t set;

    signals_run_set(&set);
    for (int sig = 1; sig < SIGRTMIN; sig++) {
        if (sig == 32 || sig == 33)
            continue; /* glibc's own (thread cancellation, setxid) */
        if (harmless(sig) || left_alone(sig))
            ck_assert_msg(!sigismember(&set, sig), "signal %d is taken", sig);
        else
            ck_assert_msg(sigismember(&set, sig) == 1, "signal %d is not taken", sig);
    }
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++) {
        ck_assert_int_eq(sigismember(&set, sig), 1);
        ck_assert_int_eq(signals_action(sig), SIGNALS_IGNORE);
    }
}
END_TEST

START_TEST(test_actions_and_names)
{
    static const int stop[] = {SIGTERM, SIGINT, SIGQUIT, SIGXCPU, SIGPWR};
    static const int ignore[] = {SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF,
                                 SIGXFSZ, SIGTTIN, SIGTTOU, SIGSTKFLT, SIGIO};
    char buf[24];

    for (size_t i = 0; i < sizeof(stop) / sizeof(stop[0]); i++)
        ck_assert_int_eq(signals_action(stop[i]), SIGNALS_STOP);
    for (size_t i = 0; i < sizeof(ignore) / sizeof(ignore[0]); i++)
        ck_assert_int_eq(signals_action(ignore[i]), SIGNALS_IGNORE);
    ck_assert_int_eq(signals_action(SIGHUP), SIGNALS_RELOAD);
    ck_assert_str_eq(signals_name(SIGUSR1, buf, sizeof(buf)), "SIGUSR1");
    ck_assert_str_eq(signals_name(SIGQUIT, buf, sizeof(buf)), "SIGQUIT");
    ck_assert_str_eq(signals_name(SIGRTMIN, buf, sizeof(buf)), "SIGRTMIN");
    ck_assert_str_eq(signals_name(SIGRTMIN + 3, buf, sizeof(buf)), "SIGRTMIN+3");
    ck_assert_str_eq(signals_name(SIGSEGV, buf, sizeof(buf)), "signal 11");
}
END_TEST

Suite *suite_signals(void);

Suite *suite_signals(void)
{
    Suite *s = suite_create("signals");
    TCase *tc = tcase_create("signals");

    tcase_add_test(tc, test_every_ending_signal_is_taken);
    tcase_add_test(tc, test_actions_and_names);
    suite_add_tcase(s, tc);
    return s;
}
