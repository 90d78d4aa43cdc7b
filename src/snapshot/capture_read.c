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
    else if (!strcmp(k, "world_size"))
        info->world_size = atoi(v);
    else if (!strcmp(k, "gpu"))
        snprintf(r->gpu, sizeof r->gpu, "%s", v);
    else if (!strcmp(k, "device_total_mib"))
        r->device_total_mib = atof(v);
}

static int sample(md_sample_rank *r, size_t *cap, const unsigned char *p)
{
    md_sample s;
    s.step = (int32_t)get_u32(p + 8);
    s.phase = p[12] <= MD_SP_OTHER ? p[12] : MD_SP_OTHER;
    s.allocated_mib = mib(get_u64(p + 13));
    s.reserved_mib = mib(get_u64(p + 21));
    s.peak_allocated_mib = mib(get_u64(p + 29));
    s.device_used_mib = mib(get_u64(p + 37));
    if (r->device_total_mib <= 0 && get_u64(p + 45) != MD_CAP_NA)
        r->device_total_mib = mib(get_u64(p + 45));
    if (md_grow((void **)&r->samples, cap, r->nsamples + 1, sizeof s))
        return -1;
    r->samples[r->nsamples++] = s;
    return 0;
}

static int parse(const unsigned char *b, size_t n, md_sample_rank *r, md_capture_info *info,
                 md_err *err)
{
    size_t pos = MD_CAP_HEADER_LEN, cap = 0;
    while (pos < n) {
        if (n - pos < 9) {
            info->truncated = 1;
            break;
        }
        uint32_t len = get_u32(b + pos);
        if (len > MD_CAP_MAX_PAYLOAD || n - pos - 9 < len) {
            info->truncated = 1;
            break;
        }
        const unsigned char *p = b + pos + 5;
        int type = b[pos + 4];
        if ((uint32_t)crc32(0L, b + pos + 4, len + 1) != get_u32(p + len)) {
            info->truncated = 1;
            break;
        }
        switch (type) {
        case MD_CAP_META: meta(r, info, p, len); break;
        case MD_CAP_SAMPLE:
            if (len == MD_CAP_SAMPLE_LEN && sample(r, &cap, p))
                return md_err_set(err, MD_E_NOMEM, (int64_t)pos, "out of memory");
            break;
        case MD_CAP_STEP: info->steps++; break;
        case MD_CAP_SNAPSHOT:
            if (len > 9 && memchr(p + 8, 0, len - 8)) {
                snprintf(info->snapshot, sizeof info->snapshot, "%s", (const char *)p + 8);
                const char *reason = (const char *)p + 9 + strlen((const char *)p + 8);
                if (reason < (const char *)p + len && memchr(reason, 0, (size_t)((const char *)p + len - reason)))
                    snprintf(info->snapshot_reason, sizeof info->snapshot_reason, "%s", reason);
            }
            break;
        case MD_CAP_OOM:
            if (len >= 32) {
                info->ooms++;
                info->oom_requested = get_u64(p + 8);
                info->oom_device_free = get_u64(p + 16);
                info->oom_limit = get_u64(p + 24);
            }
            break;
        case MD_CAP_END:
            if (len >= 12) {
                info->complete = 1;
                info->status = (int32_t)get_u32(p + 8);
            }
            break;
        default: break; /* newer record types within version 1: skipped */
        }
        pos += 9 + len;
    }
    return MD_OK;
}

int md_capture_load_mem(const void *data, size_t n, const char *name, md_sample_rank *r,
                        md_capture_info *info, md_err *err)
{
    const unsigned char *b = data;
    memset(r, 0, sizeof *r);
    memset(info, 0, sizeof *info);
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
        rc = parse(b, n, r, info, err);
    r->has_capture = 1;
    r->capture = *info;
    if (rc) {
        free(r->samples);
        r->samples = NULL;
        r->nsamples = 0;
    }
    return rc;
}

int md_capture_load(const char *path, md_sample_rank *r, md_capture_info *info, md_err *err)
{
    md_err_file(err, path);
    FILE *f = fopen(path, "rb");
    if (!f) {
        memset(r, 0, sizeof *r);
        memset(info, 0, sizeof *info);
        return md_err_set(err, MD_E_IO, -1, "cannot open capture file");
    }
    unsigned char *b = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (md_grow((void **)&b, &cap, n + 65536, 1)) {
            free(b);
            fclose(f);
            memset(r, 0, sizeof *r);
            return md_err_set(err, MD_E_NOMEM, -1, "out of memory");
        }
        size_t got = fread(b + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    fclose(f);
    int rc = md_capture_load_mem(b, n, path, r, info, err);
    free(b);
    return rc;
}
