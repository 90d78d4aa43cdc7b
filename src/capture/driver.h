/* driver.h - the driver-level tracer's record writer (driver.c, writer.c).
 * The ops (md_drv_op) are public: memdiag.h. */
#ifndef MD_CAPTURE_DRIVER_H
#define MD_CAPTURE_DRIVER_H

#include <stddef.h>
#include <stdint.h>
#include "memdiag.h"

#define MD_DRV_CALLER_MAX 64 /* a library's file name, cut there */

/* CUPTI's callback API, declared from cupti_callbacks.h (CUPTI 12/13; the
 * layout has not changed since CUPTI 4.1); tests/unit/test_driver.c checks
 * it against the real header where the toolkit is installed. */
typedef struct {
    int callback_site; /* 0 enter, 1 exit */
    const char *function_name;
    const void *params;
    void *return_value; /* CUresult *, at exit */
    const char *symbol_name;
    void *context;
    uint32_t context_uid;
    uint64_t *correlation_data;
    uint32_t correlation_id;
} cupti_cb_data;
typedef void (*cupti_cb_fn)(void *user, int domain, uint32_t cbid, const void *data);
typedef void *cupti_subscriber;

/* Parameter structs (generated_cuda_meta.h): only the leading fields read. */
typedef struct { uint64_t *dptr; size_t bytes; } p_alloc;           /* Alloc, Managed, Async */
typedef struct { uint64_t *dptr; size_t *pitch; size_t width, height; } p_pitch;
typedef struct { uint64_t dptr; } p_free;                           /* Free, FreeAsync */
typedef struct { uint64_t *handle; size_t size; const void *prop; } p_create;
typedef struct { uint64_t handle; } p_release;
/* CUmemAllocationProp: type, requestedHandleTypes, location {type, id}, ... */
typedef struct { int type, handle_types, location_type, location_id; } p_prop;
#define MD_CU_LOCATION_DEVICE 1

/* A Python extension module's dotted name from its file's path
 * (".../site-packages/cupy_backends/cuda/api/runtime.cpython-312-...so" ->
 * "cupy_backends.cuda.api.runtime"), into out; 0 if the file is not one. */
int md_drv_python_module(const char *path, char *out, size_t n);

typedef struct md_cap_driver_rec {
    int64_t time_ns;
    uint8_t op;          /* md_drv_op */
    int32_t device;      /* -1: not known (a release: its create's) */
    uint64_t id;         /* device address, or a cuMemCreate handle */
    uint64_t bytes;      /* 0 on frees and releases */
    const char *caller;  /* the library that called the driver; "" on frees */
} md_cap_driver_rec;

/* A whole record (length, type, payload, CRC) into out, which holds
 * MD_CAP_DRIVER_RECORD_MAX bytes; returns its length. The tracer buffers
 * records and writes them with md_cap_write_records (whole records per
 * write(2): a crash loses only what was not yet written). */
#define MD_CAP_DRIVER_RECORD_MAX (9 + 29 + MD_DRV_CALLER_MAX)
size_t md_cap_driver_encode(unsigned char *out, const md_cap_driver_rec *r);
int md_cap_write_records(md_cap *c, const unsigned char *b, size_t n);
int md_cap_driver(md_cap *c, const md_cap_driver_rec *r);
/* What InitializeInjection runs once: opens driver-{host}-pid{pid}.mdcap in
 * MEMDIAG_OUT and subscribes to CUPTI's memory callbacks. */
void md_driver_trace_start(void);
int InitializeInjection(void);

#endif
