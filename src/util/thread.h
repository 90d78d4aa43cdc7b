/* thread.h - starting threads (thread.c). */
#ifndef MD_THREAD_H
#define MD_THREAD_H

#include <pthread.h>
#include <stddef.h>

/* pthread_create with a stack of `bytes` (the default, 8 MB, counts
 * against ulimit -d). The sizes for each kind of work: */
#define MD_STACK_WORK ((size_t)2 << 20)     /* read, replay, analyse, render */
#define MD_STACK_HELPER ((size_t)512 << 10) /* read ahead, prefault */
int md_thread_start(pthread_t *t, void *(*fn)(void *), void *arg, size_t bytes);

#endif
