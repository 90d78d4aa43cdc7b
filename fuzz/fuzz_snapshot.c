/* fuzz_snapshot.c - libFuzzer target: any bytes through the whole read and
 * analysis path (decompression sniffing, pickle VM, schema conversion,
 * replay, steps, sites). Must never crash, hang or leak. */
#include <stdint.h>
#include <stdlib.h>
#include "memdiag.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    md_snapshot *s = NULL;
    md_err e;
    if (md_snapshot_load_mem(data, size, "fuzz", &s, &e) != MD_OK)
        return 0;
    for (int d = 0; d < md_snapshot_ndevices(s) && d < 4; d++) {
        md_replay *r;
        md_analysis *a;
        if (md_replay_run(s, d, &r, &e) != MD_OK)
            continue;
        if (md_analyze(s, r, &a, &e) == MD_OK) {
            md_site *sites;
            size_t n;
            uint64_t cat[MD_CAT_COUNT];
            if (md_sites_at(a, md_replay_peak_index(r), &sites, &n, cat, &e) == MD_OK)
                free(sites);
            md_analysis_free(a);
        }
        md_replay_free(r);
    }
    md_snapshot_free(s);
    return 0;
}
