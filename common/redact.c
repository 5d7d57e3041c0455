/*
 * redact.c - the redactor: masks credential-shaped substrings of a text in place.
 *
 * Guarantees: a masked string keeps its length (one '*' per byte), so a message stays readable
 * around the mask; nothing outside a run of token characters is ever changed; the work is one
 * pass over the text plus a bounded look at each run, with no allocation.
 */
#include "common/redact.h"

#include <ctype.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* A segment of a name-shaped run this long that mixes upper and lower case looks random. */
#define REDACT_MIXED_SEGMENT 16
/* A value after a key word ("Bearer x") is masked from this length on. */
#define REDACT_KEYED_MIN 8

static const char *const prefixes[] = {
    "sk-",    "sk_",   "pk_",   "rk_",   "ghp_",  "gho_", "ghu_", "ghs_", "ghr_", "github_pat_",
    "glpat-", "xoxb-", "xoxp-", "xoxa-", "xoxs-", "AKIA", "ASIA", "AIza", "hf_",  "npm_",
};

/* Words after which the next token is a credential: "Bearer x", "password=x", "key: x". */
static const char *const key_words[] = {
    "bearer",  "basic",   "token", "password",      "passwd", "secret",     "apikey",
    "api_key", "api-key", "key",   "authorization", "auth",   "credential", "x-api-key",
};

static bool is_token_char(unsigned char c)
{
    return isalnum(c) || c == '-' || c == '_' || c == '.' || c == '+' || c == '/' || c == '=' ||
           c == '~';
}

static size_t token_len(const char *s)
{
    size_t n = 0;

    while (s[n] != '\0' && is_token_char((unsigned char)s[n]))
        n++;
    return n;
}

static bool is_key_word(const char *s, size_t n)
{
    for (size_t k = 0; k < sizeof(key_words) / sizeof(key_words[0]); k++) {
        if (strlen(key_words[k]) == n && strncasecmp(s, key_words[k], n) == 0)
            return true;
    }
    return false;
}

/* A credential prefix, followed by at least one more character, at s[0] of n bytes. */
static bool prefix_at(const char *s, size_t n)
{
    for (size_t k = 0; k < sizeof(prefixes) / sizeof(prefixes[0]); k++) {
        size_t pl = strlen(prefixes[k]);

        if (n > pl && strncmp(s, prefixes[k], pl) == 0)
            return true;
    }
    return false;
}

/* A prefix at the start of the run or right after a '.', '/' or '=' inside it. */
static bool has_prefix(const char *run, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if ((i == 0 || strchr("./=", run[i - 1]) != NULL) && prefix_at(run + i, n - i))
            return true;
    }
    return false;
}

/* Host names and file paths are long runs too; they are told apart by their segments. */
static bool name_shaped(const char *run, size_t n)
{
    size_t seg = 0;
    bool upper = false, lower = false, separated = false;

    for (size_t i = 0; i <= n; i++) {
        unsigned char c = i < n ? (unsigned char)run[i] : '/';

        if (c == '.' || c == '/') {
            if (seg >= REDACT_TOKEN_RUN || (seg >= REDACT_MIXED_SEGMENT && upper && lower))
                return false;
            separated = separated || i < n;
            seg = 0;
            upper = lower = false;
            continue;
        }
        if (!isalnum(c) && c != '-' && c != '_')
            return false;
        seg++;
        upper = upper || isupper(c);
        lower = lower || islower(c);
    }
    return separated;
}

/* The run at s[start] follows a key word and separators (" =:\"'"): "Bearer x", "key: x". */
static bool after_key(const char *s, size_t start)
{
    size_t end = start, i;

    while (end > 0 && strchr(" =:\"'", s[end - 1]) != NULL)
        end--;
    if (end == start)
        return false;
    i = end;
    while (i > 0 && (isalnum((unsigned char)s[i - 1]) || s[i - 1] == '_' || s[i - 1] == '-'))
        i--;
    return is_key_word(s + i, end - i);
}

/* "password=x" as one run: the offset of the value, or 0 when the run is not of that form. */
static size_t keyed_value(const char *run, size_t n)
{
    const char *eq = memchr(run, '=', n);

    if (eq == NULL || eq == run || (size_t)(eq - run) + 1 >= n)
        return 0;
    return is_key_word(run, (size_t)(eq - run)) ? (size_t)(eq - run) + 1 : 0;
}

char *redact_text(char *s)
{
    size_t i = 0;

    while (s[i] != '\0') {
        size_t n, from = 0;
        bool hit;

        if (!is_token_char((unsigned char)s[i])) {
            i++;
            continue;
        }
        n = token_len(s + i);
        hit = has_prefix(s + i, n) || (n >= REDACT_TOKEN_RUN && !name_shaped(s + i, n)) ||
              (n >= REDACT_KEYED_MIN && after_key(s, i));
        if (!hit && (from = keyed_value(s + i, n)) > 0)
            hit = true;
        if (hit)
            memset(s + i + from, '*', n - from);
        i += n;
    }
    return s;
}

char *redact_copy(char *dst, size_t dstsz, const char *src)
{
    size_t n;

    if (dstsz == 0)
        return dst;
    n = strnlen(src, dstsz - 1);
    memcpy(dst, src, n);
    dst[n] = '\0';
    return redact_text(dst);
}
