/* prefault.c - the first write to a fresh page is a page fault, and on a
 * virtual machine with shadow page tables that costs 10-15 us: a 6 MB
 * snapshot's heap is ~1200 such pages, a third of `memdiag summary`'s
 * time. MADV_POPULATE_WRITE allocates pages at ~1 us each, and a read of
 * a populated page by any thread of the process makes its mapping present
 * for all of them (~5 us), so a thread that does both just ahead of
 * malloc's heap end takes the faults off the reading thread, on the CPU
 * the reading leaves idle (bench/RESULTS.md, session 21). */
#include <malloc.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "prefault.h"

#define PAGE ((uintptr_t)4096)
#define TOUCH_STEP ((uintptr_t)64 << 10) /* read per turn: stop is seen soon */

static uintptr_t heap_end(void)
{
    return (uintptr_t)syscall(SYS_brk, 0) & ~(PAGE - 1);
}

/* One read a page, of memory malloc owns: free space past its top, or
 * blocks just handed out and being written. Only the access matters, not
 * the value, so the accesses are left out of the sanitizers' view. */
__attribute__((no_sanitize("address", "thread"))) static void touch(uintptr_t from, uintptr_t to)
{
    for (uintptr_t a = from; a < to; a += PAGE)
        (void)*(volatile const char *)a;
}

static void *prefault_loop(void *arg)
{
    cli_prefault *pf = arg;
    uintptr_t populated = pf->from, touched = pf->from;
    while (!atomic_load_explicit(&pf->stop, memory_order_relaxed)) {
        uintptr_t end = heap_end();
        if (populated < end) { /* cheap: all of the new range at once */
            if (madvise((void *)populated, end - populated, MADV_POPULATE_WRITE))
                break; /* before Linux 5.14: the faults stay where they were */
            populated = end;
        }
        if (touched < populated) {
            uintptr_t to = populated - touched > TOUCH_STEP ? touched + TOUCH_STEP : populated;
            touch(touched, to);
            touched = to;
        } else {
            nanosleep(&(struct timespec){0, 20000}, NULL);
        }
    }
    return NULL;
}

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

#define PROBE_PAGES 9

double cli_fault_cost_us(void)
{
    volatile char *m = mmap(NULL, PROBE_PAGES * PAGE, PROT_READ | PROT_WRITE,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return 0;
    double t[PROBE_PAGES];
    for (size_t i = 0; i < PROBE_PAGES; i++) {
        double t0 = now_us();
        m[i * PAGE] = 1;
        t[i] = now_us() - t0;
    }
    munmap((void *)m, PROBE_PAGES * PAGE);
    for (size_t i = 1; i < PROBE_PAGES; i++) /* insertion sort: nine values */
        for (size_t k = i; k > 0 && t[k] < t[k - 1]; k--) {
            double x = t[k];
            t[k] = t[k - 1], t[k - 1] = x;
        }
    return t[PROBE_PAGES / 2];
}

void cli_prefault_start(cli_prefault *pf, size_t lead)
{
    atomic_init(&pf->stop, 0);
    pf->from = heap_end();
    mallopt(M_TOP_PAD, (int)lead);
    pf->running = !pthread_create(&pf->tid, NULL, prefault_loop, pf);
}

void cli_prefault_stop(cli_prefault *pf)
{
    if (!pf->running)
        return;
    atomic_store(&pf->stop, 1);
    pthread_join(pf->tid, NULL);
    pf->running = 0;
}
