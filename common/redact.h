/*
 * redact.h - the redactor (SPEC §3, §8): masks credential-shaped strings in text that is about
 * to be shown. The event log runs every free-text detail through it (peer error texts, OpenSSL
 * reasons); the vault loader runs every value an error or warning echoes through it, so a
 * credential pasted into the wrong field of a vault is not printed either.
 *
 * It lives in common/ because both audit/ (the log) and policy/ (vault errors) need it, and
 * policy/ must not depend on audit/.
 */
#ifndef VG_REDACT_H
#define VG_REDACT_H

#include <stddef.h>

/* A run of token characters at least this long is a credential unless it is shaped like a
 * name (see redact_text). */
#define REDACT_TOKEN_RUN 32

/*
 * Masks, in place and with one '*' per byte, every run of token characters
 * ([A-Za-z0-9] and - _ . + / = ~) that
 *   - begins with a known credential prefix (sk-, ghp_, github_pat_, xoxb-, AKIA, AIza, ...),
 *     at its start or right after a '.', '/' or '=' inside it;
 *   - is REDACT_TOKEN_RUN or more characters long, unless it is shaped like a host name or a
 *     file path: only letters, digits, '-' and '_' between '.' or '/' separators (at least
 *     one), every segment shorter than REDACT_TOKEN_RUN and none of 16 or more characters that
 *     mixes upper and lower case (those look random);
 *   - follows a key word with at least 8 characters ("Bearer x", "password: x", "token x"), or
 *     is "<key word>=<value>" (the value is masked).
 * Returns s.
 */
char *redact_text(char *s);

/*
 * Copies at most dstsz - 1 bytes of src into dst, NUL-terminates, and redacts the copy.
 * Callers that show only a prefix of src should copy REDACT_TOKEN_RUN bytes more than they
 * show, so that a credential which starts inside the shown part is still recognised whole.
 * Returns dst.
 */
char *redact_copy(char *dst, size_t dstsz, const char *src);

#endif
