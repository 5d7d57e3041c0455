/*
 * secretsrc.c - where secret bytes come from at load time: environment variables and files.
 *
 * Guarantees: every copy is in memory that is wiped before it is freed (common/secmem); a
 * variable is removed from the environment once read, every entry of it overwritten in place,
 * name and value (so /proc/<pid>/environ shows neither), and remembered (wiped memory, process
 * lifetime) so that a reload finds the value read at start; a file must be a regular file and is
 * opened non-blocking (a FIFO cannot hang a load), read up to a cap and never past it.
 */
#include "policy/secretsrc.h"
#include "common/secmem.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>

struct env_memo {
    char *name;
    char *value; /* secmem */
    size_t len;
    struct env_memo *next;
};

static pthread_mutex_t env_lock = PTHREAD_MUTEX_INITIALIZER;
static struct env_memo *env_memos;

static struct env_memo *env_memo_find(const char *name)
{
    for (struct env_memo *m = env_memos; m != NULL; m = m->next) {
        if (strcmp(m->name, name) == 0)
            return m;
    }
    return NULL;
}

/* Stores a copy of value under name (replacing an older one). 0 or -1. */
static int env_memo_put(const char *name, const char *value, size_t len)
{
    struct env_memo *m = env_memo_find(name);
    char *copy = secmem_dup(value, len);

    if (copy == NULL)
        return -1;
    if (m == NULL) {
        m = calloc(1, sizeof(*m));
        if (m == NULL || (m->name = strdup(name)) == NULL) {
            free(m);
            secmem_free(&copy, len + 1);
            return -1;
        }
        m->next = env_memos;
        env_memos = m;
    } else {
        secmem_free(&m->value, m->len + 1);
    }
    m->value = copy;
    m->len = len;
    return 0;
}

/*
 * Removes every NAME=... entry from the environment, as unsetenv() does, and overwrites each
 * with NUL bytes where it lies. unsetenv() alone only drops the pointer: /proc/<pid>/environ
 * shows the process's initial environment block, where the entry would stay readable, name and
 * value, for root (and for the same user, were the process dumpable).
 */
static void env_remove_wiped(const char *name)
{
    size_t nl = strlen(name);
    char **e = environ;

    while (e != NULL && *e != NULL) {
        char *entry = *e;

        if (strncmp(entry, name, nl) != 0 || entry[nl] != '=') {
            e++;
            continue;
        }
        for (char **d = e; *d != NULL; d++)
            d[0] = d[1];
        OPENSSL_cleanse(entry, strlen(entry));
    }
}

int secretsrc_env_take(const char *name, char **out, size_t *outlen)
{
    const char *v;
    struct env_memo *m;
    char *copy = NULL;
    size_t len = 0;

    pthread_mutex_lock(&env_lock);
    v = getenv(name);
    if (v != NULL) {
        len = strlen(v);
        copy = secmem_dup(v, len);
        if (copy != NULL && env_memo_put(name, v, len) == 0) {
            env_remove_wiped(name);
        } else {
            secmem_free(&copy, len + 1);
        }
    } else if ((m = env_memo_find(name)) != NULL) {
        len = m->len;
        copy = secmem_dup(m->value, len);
    }
    pthread_mutex_unlock(&env_lock);
    if (copy == NULL)
        return -1;
    *out = copy;
    *outlen = len;
    return 0;
}

int secretsrc_read_file(const char *path, size_t cap, char **out, size_t *outlen, char *why,
                        size_t whylen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    char *buf = NULL;
    size_t len = 0;
    ssize_t r;
    int rc = -1;

    if (fd < 0 || fstat(fd, &st) != 0) {
        snprintf(why, whylen, "%s", strerror(errno));
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "not a regular file");
        goto out;
    }
    buf = malloc(cap + 2);
    if (buf == NULL) {
        snprintf(why, whylen, "out of memory");
        goto out;
    }
    while (len <= cap && (r = read(fd, buf + len, cap + 1 - len)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            snprintf(why, whylen, "%s", strerror(errno));
            goto out;
        }
        len += (size_t)r;
    }
    if (len > cap) {
        snprintf(why, whylen, "larger than %zu bytes", cap);
        rc = -2;
        goto out;
    }
    buf[len] = '\0';
    *out = buf;
    *outlen = len;
    buf = NULL;
    rc = 0;
out:
    secmem_free(&buf, cap + 2);
    if (fd >= 0)
        close(fd);
    return rc;
}
