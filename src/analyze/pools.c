/* pools.c - the allocator's private pools (CUDA graphs, MemPool) in the
 * final segment state: how much reserved memory only they can use. */
#include <string.h>
#include "memdiag.h"

#define MAX_POOLS 64 /* distinct pools counted; more are still summed */

md_pools md_private_pools(const md_snapshot *s, int device)
{
    md_pools p;
    memset(&p, 0, sizeof p);
    int64_t seen[MAX_POOLS][2];
    size_t n;
    const md_segment *g = md_snapshot_segments(s, &n);
    for (size_t i = 0; i < n; i++) {
        if (g[i].device != device || (g[i].pool_id[0] == 0 && g[i].pool_id[1] == 0))
            continue;
        p.segments++;
        p.reserved += g[i].total_size;
        p.allocated += g[i].allocated_size;
        int k = 0;
        while (k < p.count && k < MAX_POOLS &&
               (seen[k][0] != g[i].pool_id[0] || seen[k][1] != g[i].pool_id[1]))
            k++;
        if (k == p.count) {
            if (k < MAX_POOLS)
                memcpy(seen[k], g[i].pool_id, sizeof seen[k]);
            p.count++;
        }
    }
    return p;
}
