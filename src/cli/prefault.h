/* prefault.h - faulting in the heap's fresh pages on a spare CPU. */
#ifndef MD_CLI_PREFAULT_H
#define MD_CLI_PREFAULT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cli_prefault {
    pthread_t tid;
    atomic_int stop;
    int running;
    uintptr_t from; /* the heap's end when started */
} cli_prefault;

/* Has malloc grow the heap `lead` bytes ahead of its need and starts a
 * thread that faults those pages in before the caller's threads first
 * write them; where the thread cannot start, nothing changes but speed. */
void cli_prefault_start(cli_prefault *pf, size_t lead);
/* Stops the thread (the heap keeps growing with the lead). */
void cli_prefault_stop(cli_prefault *pf);
/* Asks the thread to stop soon, from any thread, without waiting for it
 * (cli_prefault_stop still joins it). */
void cli_prefault_halt(cli_prefault *pf);
/* Has the next `bytes` of malloc's heap (rounded up to 2 MB) lie on
 * transparent huge pages: one fault for each 2 MB instead of one each
 * 4 KiB. Returns the block malloc carved below them, to free once that
 * memory is no longer in use (NULL: nothing changed: a sanitizer's malloc,
 * no heap yet). A hint: without THP, small pages as before. */
void *cli_heap_on_huge_pages(size_t bytes);
/* What a first write to a fresh page costs here, in microseconds: the
 * median of a few, on a mapping of its own (0.6-2 us on most virtual
 * machines, 11-15 us on those with shadow page tables). */
double cli_fault_cost_us(void);

#endif
