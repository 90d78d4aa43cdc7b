/* snapshot_int.h - the in-memory snapshot, shared by the loader and the
 * model/analysis layers (read-only outside snapshot/). */
#ifndef MD_SNAPSHOT_INT_H
#define MD_SNAPSHOT_INT_H

#include "../util/input.h"
#include "../util/util.h"

typedef struct md_range {
    size_t first, n;
} md_range;

struct md_snapshot {
    char *path;
    md_strtab strs;
    md_frame *frames;       /* frame id -> frame */
    size_t nframes, fcap;
    uint32_t *fslots;       /* frame intern table: id+1 */
    size_t nfslots;
    /* all stacks' frame ids back to back: 16 bits each while every frame
     * id fits (sf_wide 0), else 32 (a snapshot of 65 536 frames or more) */
    void *sframes;
    size_t nsframes, sfcap;
    int sf_wide;
    int heap_first;         /* arrays start in the heap (md_load_opts) */
    md_range *stacks;       /* stack id -> range in sframes; id 0 empty */
    size_t nstacks, stcap;
    uint32_t *sslots;       /* stack intern table */
    size_t nsslots;
    uint32_t *shash;        /* stack id -> its hash, for the table's doublings */
    size_t shcap;
    md_event *events;       /* every device's events */
    uint64_t *streams;      /* md_event.stream -> stream; [0] = 0 */
    size_t nstreams, strcap;
    size_t nevents, evcap;
    md_range *dev;          /* device -> range in events */
    int ndev;
    md_segment *segs;
    size_t nsegs, segcap;
    md_block *blocks;
    size_t nblocks, blkcap;
    md_annotation *anns;
    size_t nanns, anncap;
    md_settings settings;
    unsigned features;
    size_t nrecords;        /* trace entries, blocks and segments read by the record path */
    size_t nspills;         /* records it stopped inside, after their lists took some */
    size_t nsecond;         /* trace entries a second reader read (md_load_opts.split) */
    int split_again;        /* read again whole: a memo slot of the second's part got after it */
};

/* Reads a snapshot from in (name for messages). records: trace entries
 * read straight from their bytes where they can be (the record hook);
 * 0 builds every one as a dict first, the reader's general path, which
 * the tests and the fuzzer hold the fast one to. */
int md_snapshot_read(md_input *in, const char *name, int records, md_snapshot **out,
                     md_err *err);
/* Same, told of the trace as it is read where opts->on_events is set. */
int md_snapshot_read_with(md_input *in, const char *name, int records, const md_load_opts *opts,
                          md_snapshot **out, md_err *err);

#endif
