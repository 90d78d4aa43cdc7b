/* fuzz_snapshot.c - libFuzzer target: any bytes through every reader and
 * the analysis behind it: snapshots (decompression sniffing, pickle VM,
 * schema conversion, replay, steps, sites, findings), capture files and
 * seed JSON reports (samples, indicators, findings, validation), model
 * configs and calibration files (parameter count, the step's peak), and
 * what the pages and exports make of a snapshot (flame graph, HTML report,
 * CSV, trace JSON, torch snapshot). Must never crash, hang or leak; the
 * reader's record path must read every input as its general path does
 * (the same snapshot or the same error), in place and through the window;
 * a replay pass fed while the input is read must give the replay made
 * after it; and a read split in two must give the read whole. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "memdiag.h"
#include "render/export.h"
#include "render/flame.h"
#include "../tests/unit/snapsame.h"
#include "../tests/unit/replaysame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A capture's driver-level trace: the replay by library, all devices and one. */
static void driver(const md_sample_rank *r)
{
    md_driver_stats s;
    md_err e;
    for (int dev = -1; dev <= 0; dev++)
        if (md_driver_analyze(&r->driver, dev, &s, &e) == MD_OK)
            md_driver_stats_free(&s);
    md_driver_col *c;
    size_t n;
    if (md_driver_timeline(&r->driver, -1, 7, &c, &n, &e) == MD_OK)
        free(c);
    int64_t t[3] = {INT64_MIN, 0, INT64_MAX};
    uint64_t live[3];
    (void)md_driver_live_at(&r->driver, t, 3, live, &e);
}

static void samples(md_sample_rank *r, size_t n)
{
    md_finding *f;
    size_t nf;
    md_err e;
    md_prediction p = {0};
    md_validation v;
    p.peak = 1 << 30, p.peak_known = 1, p.floor = 1 << 28;
    md_sample_ranks_relate(r, n);
    for (size_t i = 0; i < n; i++) {
        driver(&r[i]);
        md_samples_indicators(&r[i]);
        if (md_diagnose_samples(&r[i], &f, &nf, &e) == MD_OK)
            free(f);
        (void)md_predict_validate_samples(&p, &r[i], &v, &e);
    }
    if (md_diagnose_sample_ranks(r, n, &f, &nf, &e) == MD_OK)
        free(f);
}

/* The record path against the general path on these bytes: a difference
 * is a bug, reported as a crash. */
static void records_alike(const uint8_t *data, size_t size)
{
    struct bytes b = {data, size};
    const char *why = records_difference(open_mem, &b);
    if (why) {
        fprintf(stderr, "record path differs from the general path: %s\n", why);
        abort();
    }
}

/* These bytes read split in two (md_load_opts.split: a second reader from
 * a batch of records past a place the input's size picks) against the
 * read whole: the same snapshot or the same error, or it is a bug,
 * reported as a crash. */
static void split_alike(const uint8_t *data, size_t size)
{
    md_snapshot *s[2] = {NULL, NULL};
    md_err e[2];
    char msg[2][512];
    int rc[2];
    for (int k = 0; k < 2; k++) {
        md_input *in = NULL;
        md_load_opts o = {.split = k ? 1 + (int)(size % 3) : 0,
                          .split_where = (double)(size % 7 + 1) / 8, .split_min = 1};
        memset(&e[k], 0, sizeof e[k]);
        if (md_input_mem(data, size, &in, &e[k]))
            return;
        rc[k] = md_snapshot_read_with(in, "fuzz", 1, &o, &s[k], &e[k]);
        md_input_close(in);
        md_err_format(&e[k], msg[k], sizeof msg[k]);
    }
    const char *why = rc[0] != rc[1]              ? "one read failed, the other did not"
                      : rc[0] && strcmp(msg[0], msg[1]) ? "the errors differ"
                      : rc[0]                     ? NULL
                                                  : snapshot_difference(s[0], s[1]);
    md_snapshot_free(s[0]);
    md_snapshot_free(s[1]);
    if (why) {
        fprintf(stderr, "the read split in two differs: %s (%s | %s)\n", why, msg[0], msg[1]);
        abort();
    }
}

/* The replay's first pass fed while these bytes are read (in uneven
 * batches, on this thread), or for an input of odd length only the walk a
 * reconstruction takes from it (md_pass_new_scan), against the replay
 * after the read: a difference is a bug, reported as a crash. */
static void follow_alike(const uint8_t *data, size_t size)
{
    struct bytes b = {data, size};
    md_input *in = NULL;
    md_snapshot *s = NULL;
    md_err e;
    feeder f = {size % 2 ? md_pass_new_scan() : md_pass_new(), 0, (uint32_t)size, 0, 0, 0, NULL,
                0};
    md_load_opts opts = {.on_events = feed_events, .events_ctx = &f};
    if (!f.pass || open_mem(&b, &in)) {
        md_pass_free(f.pass);
        return;
    }
    int rc = md_snapshot_read_with(in, "fuzz", 1, &opts, &s, &e);
    md_input_close(in);
    int d = rc ? -1 : first_device(s);
    const char *why = f.bad ? "told out of order" : d < 0 ? NULL : pass_difference(s, d, f.pass);
    if (d < 0)
        md_pass_free(f.pass);
    md_snapshot_free(s);
    if (why) {
        fprintf(stderr, "the replay made while reading differs: %s\n", why);
        abort();
    }
}

/* A raw pickle in memory is parsed in place; the same bytes gzipped go
 * through the reader's window (lists and strings cut by its end, the
 * window sliding and growing): both readers see every input. */
static void load_windowed(const uint8_t *data, size_t size)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return;
    size_t cap = deflateBound(&z, size);
    unsigned char *gz = malloc(cap);
    z.next_in = (unsigned char *)data;
    z.avail_in = (uInt)size;
    z.next_out = gz;
    z.avail_out = (uInt)cap;
    if (gz && deflate(&z, Z_FINISH) == Z_STREAM_END) {
        md_snapshot *s = NULL;
        md_err e;
        if (md_snapshot_load_mem(gz, cap - z.avail_out, "fuzz.gz", &s, &e) == MD_OK)
            md_snapshot_free(s);
        records_alike(gz, cap - z.avail_out);
        follow_alike(gz, cap - z.avail_out);
    }
    deflateEnd(&z);
    free(gz);
}

/* Everything the report, flamegraph and export commands write about
 * device d, into /dev/null. */
static void pages(const md_snapshot *s, int d)
{
    static FILE *null; /* the harness's own, opened once */
    md_rank rk;
    md_err e;
    if (!null && !(null = fopen("/dev/null", "w")))
        return;
    if (md_rank_build(&rk, s, d, 0, &e) != MD_OK)
        return;
    md_report rep = {&rk, 1, NULL, 0, NULL, NULL, NULL, 0};
    md_out_opts opt = {8, 1, 0};
    (void)md_render_report_html(null, &rep, &opt, "fuzz");
    (void)md_render_csv(null, &rk);
    (void)md_render_trace_json(null, &rk, 1, 64);
    if (rk.nevents) { /* the whole trace, and its second half from its end state */
        long lo[2] = {-1, (long)rk.nevents / 2 - 1}, hi = (long)rk.nevents - 1;
        (void)md_render_torch_snapshot(null, &rk, 1, &lo[0], &hi, &e);
        (void)md_render_torch_snapshot(null, &rk, 1, &lo[1], &hi, &e);
    }
    md_flame_node *v;
    size_t n;
    for (long at = -1; at < (long)rk.nevents; at += rk.nevents ? (long)rk.nevents : 1)
        if (md_flame_at(rk.a, at, (unsigned)at & MD_FLAME_PYTHON_ONLY, &v, &n, &e) == MD_OK) {
            (void)md_render_flame_folded(null, s, v, n);
            (void)md_render_flame_html(null, s, v, n, "fuzz", "fuzz");
            free(v);
        }
    md_rank_free(&rk);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size && data[0] == 0x80) {
        load_windowed(data, size);
        records_alike(data, size);
        follow_alike(data, size);
        split_alike(data, size);
    }
    md_snapshot *s = NULL;
    md_err e;
    md_sample_rank *cr, *jr;
    md_capture_info ci;
    size_t nc, nj;
    if (md_capture_load_devices_mem(data, size, "fuzz", &cr, &nc, &ci, &e) == MD_OK) {
        samples(cr, nc);
        md_sample_ranks_free(cr, nc);
    }
    if (size && data[0] == '{' && md_seedjson_load_mem(data, size, "fuzz", &jr, &nj, &e) == MD_OK) {
        samples(jr, nj);
        md_sample_ranks_free(jr, nj);
    }
    md_model m;
    md_prediction p;
    md_calibration cal;
    int have_cal = size && data[0] == '{' &&
                   md_calibration_load_mem(data, size, "fuzz", &cal, &e) == MD_OK;
    if (size && data[0] == '{' && md_model_load_mem(data, size, "fuzz", &m, &e) == MD_OK) {
        (void)md_model_params(&m);
        for (int prec = MD_FP32; prec <= MD_BF16_PURE; prec++)
            for (int par = MD_PAR_NONE; par <= MD_PAR_FSDP_NO_RESHARD; par++) {
            md_step_config st = {.batch = 8, .seq = 4096, .optimizer = MD_OPT_ADAMW,
                                 .precision = (md_precision)prec,
                                 .calibration = have_cal ? &cal : NULL, .drop_outputs = prec & 1,
                                 .checkpointing = prec == MD_BF16_PURE, .eager = prec == MD_FP32,
                                 .parallel = (md_parallel)par, .world = 2 + prec,
                                 .rank = prec - 1, .lora_rank = 8 * (prec & 1 && par < 3),
                                 .lora_targets = 127, .stream_buffers = par == 0 ? prec : 0};
            (void)md_predict(&m, &st, &p, &e);
        }
    }
    if (md_snapshot_load_mem(data, size, "fuzz", &s, &e) != MD_OK)
        return 0;
    md_replay *rs[4];
    md_analysis *as[4];
    int ids[4], na = 0;
    for (int d = 0; d < md_snapshot_ndevices(s) && d < 4; d++) {
        md_replay *r;
        md_analysis *a;
        (void)md_private_pools(s, d);
        if (md_replay_run(s, d, &r, &e) != MD_OK)
            continue;
        if (md_analyze(s, r, &a, &e) == MD_OK) {
            md_site *sites;
            size_t n;
            uint64_t cat[MD_CAT_COUNT];
            if (md_sites_at(a, md_replay_peak_index(r), &sites, &n, cat, &e) == MD_OK)
                free(sites);
            md_finding *f;
            size_t nf;
            if (md_diagnose(a, &f, &nf, &e) == MD_OK)
                free(f);
            rs[na] = r, as[na] = a, ids[na++] = d; /* compared across devices below */
            continue;
        }
        md_replay_free(r);
    }
    md_finding *f;
    size_t nf;
    if (md_diagnose_devices((const md_analysis *const *)as, ids, (size_t)na, &f, &nf, &e) == MD_OK)
        free(f);
    if (na)
        pages(s, ids[0]);
    for (int i = 0; i < na; i++) {
        md_analysis_free(as[i]);
        md_replay_free(rs[i]);
    }
    md_snapshot_free(s);
    return 0;
}
