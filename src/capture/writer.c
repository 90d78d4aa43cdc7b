/* writer.c - appends capture records (format.h). One write(2) per record
 * on an O_APPEND descriptor: nothing is buffered in the process, so a
 * SIGKILL or an OOM kill loses at most the record being written. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include "../util/util.h"
#include "driver.h"
#include "format.h"

struct md_cap {
    int fd;
};

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static unsigned char *put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

static unsigned char *put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        *p++ = (unsigned char)(v >> (8 * i));
    return p;
}

static int write_all(int fd, const unsigned char *b, size_t n)
{
    while (n) {
        ssize_t w = write(fd, b, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

static int record(md_cap *c, int type, const unsigned char *payload, size_t n)
{
    if (!c || c->fd < 0 || n > MD_CAP_MAX_PAYLOAD)
        return MD_E_ARG;
    unsigned char small[256], *buf = n + 9 <= sizeof small ? small : malloc(n + 9);
    if (!buf)
        return MD_E_NOMEM;
    unsigned char *p = put_u32(buf, (uint32_t)n);
    *p++ = (unsigned char)type;
    memcpy(p, payload, n);
    uLong crc = crc32(0L, buf + 4, (uInt)(n + 1));
    put_u32(p + n, (uint32_t)crc);
    int rc = write_all(c->fd, buf, n + 9) ? MD_E_IO : MD_OK;
    if (buf != small)
        free(buf);
    return rc;
}

int md_cap_open(const char *path, int overwrite, md_cap **out, md_err *err)
{
    md_err_file(err, path);
    int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (overwrite ? O_TRUNC : O_EXCL);
    int fd = open(path, flags, 0644);
    if (fd < 0)
        return md_err_set(err, MD_E_IO, -1, "cannot create capture file: %s%s", strerror(errno),
                          errno == EEXIST ? " (use --force to replace it)" : "");
    unsigned char hdr[MD_CAP_HEADER_LEN];
    memcpy(hdr, MD_CAP_MAGIC, MD_CAP_MAGIC_LEN);
    put_u32(put_u32(hdr + MD_CAP_MAGIC_LEN, MD_CAP_VERSION), 0);
    md_cap *c = malloc(sizeof *c);
    if (!c || write_all(fd, hdr, sizeof hdr)) {
        free(c);
        close(fd);
        return md_err_set(err, MD_E_IO, -1, "cannot write capture header");
    }
    c->fd = fd;
    *out = c;
    char pid[24]; /* the process that writes it: its driver-level trace joins it by this */
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    md_cap_meta(c, "pid", pid);
    return MD_OK;
}

/* A record of two NUL-terminated strings, after a timestamp when stamped. */
static int record_strings(md_cap *c, int type, int stamped, const char *x, const char *y)
{
    size_t head = stamped ? 8 : 0, a = strlen(x), b = strlen(y), n = head + a + b + 2;
    if (n > MD_CAP_MAX_PAYLOAD)
        return MD_E_ARG;
    unsigned char *buf = malloc(n);
    if (!buf)
        return MD_E_NOMEM;
    if (stamped)
        put_u64(buf, (uint64_t)now_ns());
    memcpy(buf + head, x, a + 1);
    memcpy(buf + head + a + 1, y, b + 1);
    int rc = record(c, type, buf, n);
    free(buf);
    return rc;
}

int md_cap_meta(md_cap *c, const char *key, const char *value)
{
    return record_strings(c, MD_CAP_META, 0, key, value);
}

static unsigned char *put_sample(unsigned char *p, const md_cap_sample *s)
{
    p = put_u64(p, (uint64_t)now_ns());
    p = put_u32(p, (uint32_t)s->step);
    *p++ = (unsigned char)s->phase;
    p = put_u64(p, s->allocated);
    p = put_u64(p, s->reserved);
    p = put_u64(p, s->peak_allocated);
    p = put_u64(p, s->device_used);
    p = put_u64(p, s->device_total);
    return put_u64(p, s->process_used);
}

int md_cap_write_sample(md_cap *c, const md_cap_sample *s)
{
    unsigned char b[MD_CAP_SAMPLE_LEN];
    put_sample(b, s);
    return record(c, MD_CAP_SAMPLE, b, sizeof b);
}

int md_cap_write_device_sample(md_cap *c, int device, const md_cap_sample *s)
{
    unsigned char b[MD_CAP_DEVICE_SAMPLE_LEN];
    put_sample(put_u32(b, (uint32_t)device), s);
    return record(c, MD_CAP_DEVICE_SAMPLE, b, sizeof b);
}

int md_cap_step(md_cap *c, int step)
{
    return md_cap_optimizer_step(c, step, -1);
}

int md_cap_optimizer_step(md_cap *c, int step, int optimizer)
{
    unsigned char b[16];
    put_u32(put_u32(put_u64(b, (uint64_t)now_ns()), (uint32_t)step), (uint32_t)optimizer);
    return record(c, MD_CAP_STEP, b, optimizer < 0 ? 12 : sizeof b);
}

int md_cap_processes(md_cap *c, int device, const md_gpu_process *p, size_t n)
{
    unsigned char b[MD_CAP_PROCESSES_FIXED + MD_CAP_MAX_PROCESSES * (MD_CAP_PROCESS_FIXED + 64)];
    if (n > MD_CAP_MAX_PROCESSES)
        n = MD_CAP_MAX_PROCESSES;
    unsigned char *q = put_u32(put_u32(put_u64(b, (uint64_t)now_ns()), (uint32_t)device),
                               (uint32_t)n);
    for (size_t i = 0; i < n; i++) {
        size_t len = strnlen(p[i].name, sizeof p[i].name - 1);
        q = put_u64(put_u32(put_u32(q, p[i].pid), p[i].ppid), p[i].used);
        memcpy(q, p[i].name, len);
        q += len;
        *q++ = 0;
    }
    return record(c, MD_CAP_PROCESSES, b, (size_t)(q - b));
}

int md_cap_snapshot(md_cap *c, const char *path, const char *reason)
{
    return record_strings(c, MD_CAP_SNAPSHOT, 1, path, reason);
}

int md_cap_oom(md_cap *c, uint64_t requested, uint64_t device_free, uint64_t limit)
{
    unsigned char b[32];
    put_u64(put_u64(put_u64(put_u64(b, (uint64_t)now_ns()), requested), device_free), limit);
    return record(c, MD_CAP_OOM, b, sizeof b);
}

_Static_assert(MD_CAP_DRIVER_RECORD_MAX == 9 + MD_CAP_DRIVER_FIXED + MD_DRV_CALLER_MAX, "room");

size_t md_cap_driver_encode(unsigned char *out, const md_cap_driver_rec *r)
{
    size_t n = strnlen(r->caller, MD_DRV_CALLER_MAX - 1), len = MD_CAP_DRIVER_FIXED + n + 1;
    unsigned char *p = put_u32(out, (uint32_t)len);
    *p++ = MD_CAP_DRIVER;
    p = put_u64(p, (uint64_t)r->time_ns);
    *p++ = r->op;
    p = put_u64(put_u64(put_u32(p, (uint32_t)r->device), r->id), r->bytes);
    memcpy(p, r->caller, n);
    p[n] = 0;
    put_u32(p + n + 1, (uint32_t)crc32(0L, out + 4, (uInt)(len + 1)));
    return len + 9;
}

int md_cap_write_records(md_cap *c, const unsigned char *b, size_t n)
{
    if (!c || c->fd < 0)
        return MD_E_ARG;
    return write_all(c->fd, b, n) ? MD_E_IO : MD_OK;
}

int md_cap_driver(md_cap *c, const md_cap_driver_rec *r)
{
    unsigned char b[MD_CAP_DRIVER_RECORD_MAX];
    return md_cap_write_records(c, b, md_cap_driver_encode(b, r));
}

int md_cap_close(md_cap *c, int status)
{
    if (!c)
        return MD_E_ARG;
    unsigned char b[12];
    put_u32(put_u64(b, (uint64_t)now_ns()), (uint32_t)status);
    int rc = record(c, MD_CAP_END, b, sizeof b);
    if (close(c->fd) && rc == MD_OK)
        rc = MD_E_IO;
    free(c);
    return rc;
}
