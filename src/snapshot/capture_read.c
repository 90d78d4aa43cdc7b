/* capture_read.c - reads memdiag's capture files (src/capture/format.h)
 * into the phase-sample model. Reads up to the last complete record: a
 * torn tail (a crash mid-write) is skipped and reported, never parsed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include "../capture/format.h"
#include "../util/util.h"

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static double mib(uint64_t v)
{
    return v == MD_CAP_NA ? -1 : (double)v / 1048576.0;
}

static void meta(md_sample_rank *r, md_capture_info *info, const unsigned char *p, size_t n)
{
    const char *k = (const char *)p;
    size_t kl = strnlen(k, n);
    if (kl + 1 >= n)
        return;
    const char *v = k + kl + 1;
    if (strnlen(v, n - kl - 1) == n - kl - 1)
        return; /* not terminated */
    if (!strcmp(k, "rank"))
        r->rank = atoi(v);
    else if (!strcmp(k, "local_rank"))
        r->local_rank = atoi(v);
    else if (!strcmp(k, "cuda_device")) /* the last one: the process may move */
        r->device = atoi(v);
    else if (!strcmp(k, "world_size"))
        info->world_size = atoi(v);
    else if (!strcmp(k, "gpu"))
        snprintf(r->gpu, sizeof r->gpu, "%s", v);
    else if (!strcmp(k, "device_total_mib"))
        r->device_total_mib = atof(v);
    else if (!strcmp(k, "pid"))
        r->pid = atoi(v);
    else if (!strcmp(k, "ppid"))
        r->ppid = atoi(v);
    else if (!strcmp(k, "role"))
        snprintf(r->role, sizeof r->role, "%s", v);
    else if (!strcmp(k, "host"))
        snprintf(r->host, sizeof r->host, "%s", v);
    else if (!strcmp(k, "kind"))
        r->driver_file = !strcmp(v, "driver");
    else if (!strcmp(k, "driver")) {
        r->driver.present = 1;
        snprintf(r->driver.status, sizeof r->driver.status, "%s", v);
    }
}

/* The driver log's capacities while reading, and its library names by
 * hash (a made-up file may name a new library on every record). */
typedef struct driver_caps {
    size_t ev, callers;
    md_map names; /* md_hash of a name -> its index */
} driver_caps;

static int same_name(const md_driver_log *d, size_t i, const char *name, size_t n)
{
    return strlen(d->callers[i]) == n && !memcmp(d->callers[i], name, n);
}

/* A caller's index in the log's list of library names. */
static int64_t caller_index(md_driver_log *d, driver_caps *caps, const char *name, size_t n)
{
    if (n >= MD_DRIVER_NAME_LEN)
        n = MD_DRIVER_NAME_LEN - 1;
    uint64_t h = md_hash(name, n, 0), at;
    if (!caps->names.cap && md_map_init(&caps->names, 16))
        return -1;
    if (md_map_get(&caps->names, h, &at) && same_name(d, (size_t)at, name, n))
        return (int64_t)at;
    for (size_t i = 0; md_map_get(&caps->names, h, NULL) && i < d->ncallers; i++)
        if (same_name(d, i, name, n)) /* another name with the same hash: rare */
            return (int64_t)i;
    if (d->ncallers >= UINT32_MAX ||
        md_grow((void **)&d->callers, &caps->callers, d->ncallers + 1, sizeof *d->callers) ||
        md_map_add(&caps->names, h, d->ncallers) < 0)
        return -1;
    memcpy(d->callers[d->ncallers], name, n);
    d->callers[d->ncallers][n] = 0;
    return (int64_t)d->ncallers++;
}

/* One MD_CAP_DRIVER record; one that is too short or names no known
 * operation is skipped, as an unknown record is. */
static int driver_event(md_driver_log *d, driver_caps *caps, const unsigned char *p, uint32_t len)
{
    if (len <= MD_CAP_DRIVER_FIXED || p[8] < MD_DRV_ALLOC || p[8] > MD_DRV_FREE_ASYNC)
        return 0;
    const char *name = (const char *)p + MD_CAP_DRIVER_FIXED;
    size_t room = len - MD_CAP_DRIVER_FIXED, n = strnlen(name, room);
    if (n == room)
        return 0; /* caller not terminated */
    if (!d->ncallers && caller_index(d, caps, "", 0) < 0)
        return -1;
    int64_t who = caller_index(d, caps, name, n);
    if (who < 0 || md_grow((void **)&d->ev, &caps->ev, d->n + 1, sizeof *d->ev))
        return -1;
    md_driver_event *e = &d->ev[d->n++];
    e->time_ns = (int64_t)get_u64(p);
    e->op = p[8];
    e->device = (int32_t)get_u32(p + 9);
    e->id = get_u64(p + 13);
    e->bytes = get_u64(p + 21);
    e->caller = (uint32_t)who;
    d->present = 1;
    return 0;
}

static void snapshot(md_capture_info *info, const unsigned char *p, uint32_t len)
{
    if (len <= 9 || !memchr(p + 8, 0, len - 8))
        return;
    snprintf(info->snapshot, sizeof info->snapshot, "%s", (const char *)p + 8);
    const char *reason = (const char *)p + 9 + strlen((const char *)p + 8);
    const char *end = (const char *)p + len;
    if (reason < end && memchr(reason, 0, (size_t)(end - reason)))
        snprintf(info->snapshot_reason, sizeof info->snapshot_reason, "%s", reason);
}

static int sample(md_sample_rank *r, size_t *cap, const unsigned char *p)
{
    md_sample s;
    s.time_ns = (int64_t)get_u64(p);
    s.step = (int32_t)get_u32(p + 8);
    s.phase = p[12] <= MD_SP_OTHER ? p[12] : MD_SP_OTHER;
    s.allocated_mib = mib(get_u64(p + 13));
    s.reserved_mib = mib(get_u64(p + 21));
    s.peak_allocated_mib = mib(get_u64(p + 29));
    s.device_used_mib = mib(get_u64(p + 37));
    s.process_used_mib = mib(get_u64(p + 53));
    if (r->device_total_mib <= 0 && get_u64(p + 45) != MD_CAP_NA)
        r->device_total_mib = mib(get_u64(p + 45));
    if (md_grow((void **)&r->samples, cap, r->nsamples + 1, sizeof s))
        return -1;
    r->samples[r->nsamples++] = s;
    return 0;
}

/* Series of the further devices a process used, in device order. */
typedef struct further {
    md_sample_rank *r;
    size_t *samplecap; /* each series' sample capacity, beside it */
    size_t n, cap, capcap;
} further;

#define MAX_DEVICE 4096

static md_sample_rank *further_series(further *f, int device, size_t **samplecap)
{
    size_t i = 0;
    while (i < f->n && f->r[i].device < device)
        i++;
    if (i == f->n || f->r[i].device != device) {
        if (md_grow((void **)&f->r, &f->cap, f->n + 1, sizeof *f->r) ||
            md_grow((void **)&f->samplecap, &f->capcap, f->n + 1, sizeof *f->samplecap))
            return NULL;
        memmove(f->r + i + 1, f->r + i, (f->n - i) * sizeof *f->r);
        memmove(f->samplecap + i + 1, f->samplecap + i, (f->n - i) * sizeof *f->samplecap);
        memset(&f->r[i], 0, sizeof f->r[i]);
        f->r[i].device = device;
        f->r[i].further_device = 1;
        f->samplecap[i] = 0;
        f->n++;
    }
    *samplecap = &f->samplecap[i];
    return &f->r[i];
}

static int device_sample(further *f, const unsigned char *p)
{
    int device = (int32_t)get_u32(p);
    size_t *cap;
    if (device < 0 || device >= MAX_DEVICE)
        return 0; /* not a device index: skipped, like an unknown record */
    md_sample_rank *r = further_series(f, device, &cap);
    return r ? sample(r, cap, p + 4) : -1;
}

/* A PROCESSES record: each other process once, at its largest use. A
 * malformed list is skipped from where it stops making sense. */
static int processes(md_sample_rank *r, size_t *cap, const unsigned char *p, uint32_t len)
{
    if (len < MD_CAP_PROCESSES_FIXED)
        return 0;
    uint32_t n = get_u32(p + 12);
    size_t pos = MD_CAP_PROCESSES_FIXED;
    for (uint32_t i = 0; i < n && i < MD_CAP_MAX_PROCESSES; i++) {
        if (len - pos <= MD_CAP_PROCESS_FIXED)
            return 0;
        const char *name = (const char *)p + pos + MD_CAP_PROCESS_FIXED;
        size_t room = len - pos - MD_CAP_PROCESS_FIXED, nl = strnlen(name, room);
        if (nl == room)
            return 0;
        md_gpu_process g = {.pid = get_u32(p + pos), .ppid = get_u32(p + pos + 4),
                            .used = get_u64(p + pos + 8)};
        for (size_t c = 0; c < nl && c < sizeof g.name - 1; c++) /* shown as one line */
            g.name[c] = (unsigned char)name[c] < 0x20 ? ' ' : name[c];
        pos += MD_CAP_PROCESS_FIXED + nl + 1;
        size_t k = 0;
        while (k < r->nothers && r->others[k].pid != g.pid)
            k++;
        if (k == r->nothers) {
            if (md_grow((void **)&r->others, cap, k + 1, sizeof g))
                return -1;
            r->others[r->nothers++] = g;
        } else if (g.used != MD_CAP_NA && (r->others[k].used == MD_CAP_NA ||
                                           g.used > r->others[k].used)) {
            r->others[k].used = g.used;
        }
    }
    return 0;
}

/* What a file is read into: its own device's samples, further devices',
 * the driver-level trace, and the capacities behind them. */
typedef struct reading {
    md_sample_rank *r;
    md_capture_info *info;
    further *f;
    size_t samplecap, stepoptcap, otherscap;
    driver_caps driver;
} reading;

/* A STEP record that says which optimizer took the step (16 bytes; the
 * 12 of files before it do not). */
static int step_optimizer(reading *x, const unsigned char *p, uint32_t len)
{
    md_sample_rank *r = x->r;
    if (len < 16 || (int32_t)get_u32(p + 12) < 0)
        return 0;
    if (md_grow((void **)&r->step_optimizers, &x->stepoptcap, r->nstep_optimizers + 1,
                sizeof *r->step_optimizers))
        return -1;
    r->step_optimizers[r->nstep_optimizers++] =
        (md_step_optimizer){(int32_t)get_u32(p + 8), (int32_t)get_u32(p + 12)};
    return 0;
}

/* One whole record, its CRC checked; nonzero when out of memory. */
static int one_record(reading *x, int type, const unsigned char *p, uint32_t len)
{
    md_capture_info *info = x->info;
    switch (type) {
    case MD_CAP_META: meta(x->r, info, p, len); return 0;
    case MD_CAP_SAMPLE: return len == MD_CAP_SAMPLE_LEN ? sample(x->r, &x->samplecap, p) : 0;
    case MD_CAP_DEVICE_SAMPLE:
        return len == MD_CAP_DEVICE_SAMPLE_LEN && x->f ? device_sample(x->f, p) : 0;
    case MD_CAP_DRIVER: return driver_event(&x->r->driver, &x->driver, p, len);
    case MD_CAP_PROCESSES: return processes(x->r, &x->otherscap, p, len);
    case MD_CAP_STEP:
        info->steps++;
        info->steps_after_oom += info->ooms > 0;
        return step_optimizer(x, p, len);
    case MD_CAP_SNAPSHOT: snapshot(info, p, len); return 0;
    case MD_CAP_OOM:
        if (len >= 32) {
            info->ooms++;
            info->steps_after_oom = 0;
            info->oom_time_ns = (int64_t)get_u64(p);
            info->oom_requested = get_u64(p + 8);
            info->oom_device_free = get_u64(p + 16);
            info->oom_limit = get_u64(p + 24);
        }
        return 0;
    case MD_CAP_END:
        if (len >= 12) {
            info->complete = 1;
            info->status = (int32_t)get_u32(p + 8);
        }
        return 0;
    default: return 0; /* newer record types within version 1: skipped */
    }
}

static int parse(const unsigned char *b, size_t n, md_sample_rank *r, md_capture_info *info,
                 further *f, md_err *err)
{
    reading x = {.r = r, .info = info, .f = f};
    size_t pos = MD_CAP_HEADER_LEN;
    int rc = MD_OK;
    while (pos < n && rc == MD_OK) {
        uint32_t len = n - pos < 9 ? 0 : get_u32(b + pos);
        const unsigned char *p = b + pos + 5;
        if (n - pos < 9 || len > MD_CAP_MAX_PAYLOAD || n - pos - 9 < len ||
            (uint32_t)crc32(0L, b + pos + 4, len + 1) != get_u32(p + len)) {
            info->truncated = 1; /* a torn or corrupt tail: read up to here */
            break;
        }
        if (one_record(&x, b[pos + 4], p, len))
            rc = md_err_set(err, MD_E_NOMEM, (int64_t)pos, "out of memory");
        pos += 9 + len;
    }
    md_map_free(&x.driver.names);
    return rc;
}

/* A further device on which the process never reserved memory nor made a
 * CUDA context was visible, not used (the runtime samples every device
 * for a process's first steps): dropped. */
static int used(const md_sample_rank *r)
{
    for (size_t i = 0; i < r->nsamples; i++)
        if (r->samples[i].reserved_mib > 0 || r->samples[i].process_used_mib > 0)
            return 1;
    return 0;
}

/* The own device's series, then each used further device's, sharing its
 * rank, source and capture facts. */
static double max_reserved(const md_sample_rank *r)
{
    double m = 0;
    for (size_t i = 0; i < r->nsamples; i++)
        if (r->samples[i].reserved_mib > m)
            m = r->samples[i].reserved_mib;
    return m;
}

/* The process's own device is where it keeps its memory. The runtime
 * samples the current device as its own, but a process that never calls
 * set_device and names its GPU in each tensor ("cuda:1") stays current on
 * cuda:0, holding only a context there: the series trade places. */
static void own_is_the_largest(md_sample_rank *own, further *f)
{
    size_t best = f->n;
    double most = max_reserved(own);
    for (size_t i = 0; i < f->n; i++)
        if (f->r[i].device != own->device && max_reserved(&f->r[i]) > most) {
            best = i;
            most = max_reserved(&f->r[i]);
        }
    if (best == f->n)
        return;
    md_sample_rank *x = &f->r[best];
    md_sample *samples = own->samples;
    size_t nsamples = own->nsamples;
    int device = own->device;
    double total = own->device_total_mib;
    md_gpu_process *others = own->others; /* seen on the device the samples measured */
    size_t nothers = own->nothers;
    own->others = x->others, own->nothers = x->nothers;
    x->others = others, x->nothers = nothers;
    own->samples = x->samples, own->nsamples = x->nsamples, own->device = x->device;
    own->device_total_mib = x->device_total_mib > 0 ? x->device_total_mib : total;
    x->samples = samples, x->nsamples = nsamples, x->device = device;
    x->device_total_mib = total;
}

/* A job that never calls zero_grad (gradients cleared by `p.grad = None`,
 * or never) has no after_clear_gradients samples: each step then ends at
 * its optimizer step, as the snapshot's steps do, by a copy of that sample
 * right after it. */
static int steps_end_at_optimizer(md_sample_rank *r)
{
    size_t k = 0;
    for (size_t i = 0; i < r->nsamples; i++) {
        if (r->samples[i].phase == MD_SP_AFTER_CLEAR_GRADIENTS)
            return 0;
        k += r->samples[i].phase == MD_SP_AFTER_OPTIMIZER_STEP && r->samples[i].step >= 0;
    }
    if (!k)
        return 0;
    md_sample *all = malloc((r->nsamples + k) * sizeof *all);
    if (!all)
        return -1;
    size_t n = 0;
    for (size_t i = 0; i < r->nsamples; i++) {
        all[n++] = r->samples[i];
        if (r->samples[i].phase == MD_SP_AFTER_OPTIMIZER_STEP && r->samples[i].step >= 0) {
            all[n] = r->samples[i];
            all[n++].phase = MD_SP_AFTER_CLEAR_GRADIENTS;
        }
    }
    free(r->samples);
    r->samples = all;
    r->nsamples = n;
    return 0;
}

static int assemble(md_sample_rank *own, further *f, md_sample_rank **out, size_t *nout)
{
    size_t k = 1;
    own_is_the_largest(own, f);
    md_sample_rank *all = malloc((f->n + 1) * sizeof *all);
    if (!all)
        return -1;
    all[0] = *own;
    for (size_t i = 0; i < f->n; i++) {
        md_sample_rank *x = &f->r[i];
        if (!used(x) || x->device == own->device || steps_end_at_optimizer(x)) {
            md_sample_rank_clear(x);
            continue;
        }
        x->rank = own->rank;
        x->local_rank = own->local_rank;
        x->pid = own->pid;
        x->ppid = own->ppid;
        memcpy(x->role, own->role, sizeof x->role);
        memcpy(x->host, own->host, sizeof x->host);
        x->has_capture = 1;
        x->capture = own->capture;
        memcpy(x->source, own->source, sizeof x->source); /* gpu: its own is not recorded */
        all[k++] = *x;
    }
    f->n = 0;
    *out = all;
    *nout = k;
    return 0;
}

static void further_free(further *f)
{
    for (size_t i = 0; i < f->n; i++)
        md_sample_rank_clear(&f->r[i]);
    free(f->r);
    free(f->samplecap);
}

static int load_mem(const void *data, size_t n, const char *name, md_sample_rank *r,
                    md_capture_info *info, further *f, md_err *err)
{
    const unsigned char *b = data;
    memset(r, 0, sizeof *r);
    memset(info, 0, sizeof *info);
    r->device = -1;
    info->status = -1;
    md_err_file(err, name);
    snprintf(r->source, sizeof r->source, "%s", name);
    int rc = MD_OK;
    if (n < MD_CAP_HEADER_LEN || memcmp(b, MD_CAP_MAGIC, MD_CAP_MAGIC_LEN))
        rc = md_err_set(err, MD_E_FORMAT, 0, "not a memdiag capture file (bad magic)");
    else if (get_u32(b + MD_CAP_MAGIC_LEN) > MD_CAP_VERSION)
        rc = md_err_set(err, MD_E_FORMAT, MD_CAP_MAGIC_LEN,
                        "capture file version %u is newer than this memdiag reads (%u): "
                        "update memdiag", get_u32(b + MD_CAP_MAGIC_LEN), MD_CAP_VERSION);
    else
        rc = parse(b, n, r, info, f, err);
    if (rc == MD_OK && steps_end_at_optimizer(r))
        rc = md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    r->has_capture = 1;
    r->capture = *info;
    if (rc)
        md_sample_rank_clear(r);
    return rc;
}

int md_capture_load_mem(const void *data, size_t n, const char *name, md_sample_rank *r,
                        md_capture_info *info, md_err *err)
{
    return load_mem(data, n, name, r, info, NULL, err);
}

int md_capture_load_devices_mem(const void *data, size_t len, const char *name,
                                md_sample_rank **ranks, size_t *n, md_capture_info *info,
                                md_err *err)
{
    further f = {0};
    md_sample_rank own;
    *ranks = NULL;
    *n = 0;
    int rc = load_mem(data, len, name, &own, info, &f, err);
    if (rc == MD_OK && assemble(&own, &f, ranks, n)) {
        md_sample_rank_clear(&own);
        rc = md_err_set(err, MD_E_NOMEM, -1, "out of memory");
    }
    further_free(&f);
    return rc;
}

/* The whole file in memory (capture files are small: ~100 bytes a sample). */
static int slurp(const char *path, unsigned char **out, size_t *len, md_err *err)
{
    md_err_file(err, path);
    FILE *f = fopen(path, "rb");
    if (!f)
        return md_err_set(err, MD_E_IO, -1, "cannot open capture file");
    unsigned char *b = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (md_grow((void **)&b, &cap, n + 65536, 1)) {
            free(b);
            fclose(f);
            return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    *out = b;
    *len = n;
    return MD_OK;
}

int md_capture_load_devices(const char *path, md_sample_rank **ranks, size_t *n,
                            md_capture_info *info, md_err *err)
{
    unsigned char *b;
    size_t len;
    *ranks = NULL;
    *n = 0;
    memset(info, 0, sizeof *info);
    int rc = slurp(path, &b, &len, err);
    if (rc)
        return rc;
    rc = md_capture_load_devices_mem(b, len, path, ranks, n, info, err);
    free(b);
    return rc;
}

int md_capture_load(const char *path, md_sample_rank *r, md_capture_info *info, md_err *err)
{
    unsigned char *b;
    size_t len;
    memset(r, 0, sizeof *r);
    memset(info, 0, sizeof *info);
    int rc = slurp(path, &b, &len, err);
    if (rc)
        return rc;
    rc = md_capture_load_mem(b, len, path, r, info, err);
    free(b);
    return rc;
}
