/* thread.c - starting threads with stacks sized for what they run. */
#include <limits.h>
#include <pthread.h>
#include "thread.h"

/* A thread's stack is private writable memory and counts, all of it,
 * against a data-size limit (ulimit -d): glibc's default, RLIMIT_STACK's
 * 8 MB, made a 1.3 MB snapshot fail under a 10 MB limit that 8 MB (the
 * thread not made, its work done inline) had passed. memdiag's code does
 * not recurse and its largest frame is 28 KB: `bytes` is a generous bound
 * for each thread's work. Returns pthread_create's result. */
int md_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, size_t bytes)
{
    pthread_attr_t at;
    if (pthread_attr_init(&at))
        return pthread_create(t, NULL, fn, arg);
    if (bytes < (size_t)PTHREAD_STACK_MIN)
        bytes = PTHREAD_STACK_MIN;
    int rc = pthread_attr_setstacksize(&at, bytes);
    rc = rc ? pthread_create(t, NULL, fn, arg) : pthread_create(t, &at, fn, arg);
    pthread_attr_destroy(&at);
    return rc;
}
