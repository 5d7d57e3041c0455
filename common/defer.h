/*
 * defer.h - freeing an object that its own callbacks may close: a close requested while a
 * callback of the object is on the stack frees it only when the outermost one returns (Redis
 * connhelpers.h). One counter and one flag, embedded in the object.
 *
 * Every callback brackets its work with defer_enter() and defer_leave(); the teardown calls
 * defer_free(). Each of the two tells its caller when the memory goes now. defer_freed() is true
 * from the teardown on: code that may run after it checks it before touching anything else.
 */
#ifndef VG_DEFER_H
#define VG_DEFER_H

#include <stdbool.h>

struct defer {
    int depth;  /* callbacks of the object on the stack */
    bool freed; /* the teardown ran; the memory goes at depth 0 */
};

static inline void defer_enter(struct defer *d)
{
    d->depth++;
}

/* true when the caller must free the object now: the outermost callback returns after a
 * teardown. */
static inline bool defer_leave(struct defer *d)
{
    return --d->depth == 0 && d->freed;
}

/* Marks the object torn down; true when the caller must free it now (no callback on the
 * stack), else the outermost defer_leave() will say so. */
static inline bool defer_free(struct defer *d)
{
    d->freed = true;
    return d->depth == 0;
}

static inline bool defer_freed(const struct defer *d)
{
    return d->freed;
}

#endif
