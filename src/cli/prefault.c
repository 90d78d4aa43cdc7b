/* prefault.c - the first write to a fresh page is a page fault, and on a
 * virtual machine with shadow page tables that costs 10-15 us: a 6 MB
 * snapshot's heap is ~1200 such pages, a third of `memdiag summary`'s
 * time. MADV_POPULATE_WRITE allocates pages at ~1 us each, and a read of
 * a populated page by any thread of the process makes its mapping present
 * for all of them (~5 us), so a thread that does both just ahead of
 * malloc's heap end takes the faults off the reading thread, on the CPU
 * the reading leaves idle (bench/RESULTS.md, session 21). Where a small
 * input leaves that thread too little to do, the heap goes on transparent
 * huge pages instead: a fault for each 2 MB (session 28). */
#include <malloc.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "cli.h"
#include "prefault.h"
#include "../util/thread.h"
#include "../util/util.h"

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

/* ---- the heap on huge pages ------------------------------------------------- */

#define HUGE ((uintptr_t)MD_HUGE_PAGE)
#define HUGE_GAP ((uintptr_t)64 << 10) /* small pages kept below the first huge one */

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FOREIGN_MALLOC 1 /* the sanitizer's: no brk heap, no mallopt */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define FOREIGN_MALLOC 1
#endif
#endif

void *cli_heap_on_huge_pages(size_t bytes)
{
#ifdef FOREIGN_MALLOC
    (void)bytes;
    return NULL;
#else
    struct mallinfo2 mi = mallinfo2();
    uintptr_t end = heap_end();
    if (!mi.arena || !bytes || bytes > ((size_t)1 << 30))
        return NULL;
    bytes = (bytes + HUGE - 1) & ~(HUGE - 1);
    uintptr_t top = end - mi.keepcost; /* the top chunk, where malloc carves next */
    uintptr_t first = (end + HUGE_GAP + HUGE - 1) & ~(HUGE - 1);
    if (first - HUGE_GAP - top < 64) /* room for the block's header */
        first += HUGE;
    /* a block from the top up to just below a huge page's start: what malloc
     * hands out next lies above it; only its header page is ever written.
     * The heap, not a mapping, gives it (the threshold), and grows past the
     * range asked for in the same step (the pad), before any of it is
     * written: advice comes too late for a 2 MB range with a page in it. */
    mallopt(M_MMAP_THRESHOLD, (int)(2 * HUGE + HUGE_GAP));
    mallopt(M_TOP_PAD, (int)(HUGE_GAP + bytes));
    void *below = malloc(first - HUGE_GAP - top - 4 * sizeof(size_t));
    mallopt(M_TOP_PAD, CLI_TOP_PAD);
    mallopt(M_MMAP_THRESHOLD, CLI_MMAP_THRESHOLD);
    if (below && heap_end() >= first + bytes)
        madvise((void *)first, bytes, MADV_HUGEPAGE);
    return below;
#endif
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
    pf->running = !md_thread_start(&pf->tid, prefault_loop, pf, MD_STACK_HELPER);
}

void cli_prefault_halt(cli_prefault *pf)
{
    atomic_store(&pf->stop, 1);
}

void cli_prefault_stop(cli_prefault *pf)
{
    if (!pf->running)
        return;
    atomic_store(&pf->stop, 1);
    pthread_join(pf->tid, NULL);
    pf->running = 0;
}
