/* format.h - memdiag's capture file: what `memdiag run` records inside a
 * training process besides torch's own snapshot.
 *
 * Layout (all integers little-endian):
 *   file   = magic "MDCAP\r\n\x1a" (8 bytes) | u32 version | u32 reserved | record*
 *   record = u32 payload_len | u8 type | payload | u32 crc32(type, payload)
 * Each record is written with one write(2) on an O_APPEND descriptor, so the
 * file is readable up to the last complete record after a crash or SIGKILL
 * (the kernel keeps what write returned); a torn tail fails its length or
 * CRC and is reported, never read as data. Readers accept older versions
 * and refuse newer ones. */
#ifndef MD_CAPTURE_FORMAT_H
#define MD_CAPTURE_FORMAT_H

#include <stdint.h>

#define MD_CAP_MAGIC "MDCAP\r\n\x1a"
#define MD_CAP_MAGIC_LEN 8
#define MD_CAP_VERSION 1u
#define MD_CAP_HEADER_LEN 16
#define MD_CAP_MAX_PAYLOAD (1u << 20)

enum md_cap_record {
    MD_CAP_META = 1,     /* key \0 value \0 */
    MD_CAP_SAMPLE = 2,   /* see md_cap_sample_rec */
    MD_CAP_STEP = 3,     /* i64 time_ns | i32 step [| i32 optimizer]: an optimizer
                            step finished (which optimizer: 0, 1, ... in the
                            order they first stepped; absent when unknown) */
    MD_CAP_SNAPSHOT = 4, /* i64 time_ns | path \0 reason \0 */
    MD_CAP_OOM = 5,      /* i64 time_ns | u64 requested | u64 device_free | u64 limit */
    MD_CAP_END = 6,      /* i64 time_ns | i32 status: the process closed the file */
    MD_CAP_DEVICE_SAMPLE = 7, /* i32 device | a sample's payload: the same phase point
                                on a further device the process uses (DataParallel,
                                a model split); readers before it skip it */
    MD_CAP_DRIVER = 8,   /* i64 time_ns | u8 op | i32 device | u64 id | u64 bytes |
                            caller \0: one CUDA driver allocation call (driver.c) */
    MD_CAP_PROCESSES = 9 /* i64 time_ns | i32 device | u32 n | n x (u32 pid | u32 ppid |
                            u64 used | command line \0): the other processes NVML
                            lists on the device, written when they change */
};
#define MD_CAP_DRIVER_FIXED (8 + 1 + 4 + 8 + 8)

/* MD_CAP_SAMPLE payload, field by field (61 bytes):
 *   i64 time_ns, i32 step, u8 phase (md_sample_phase),
 *   u64 allocated, u64 reserved, u64 peak_allocated (since the last sample),
 *   u64 device_used, u64 device_total, u64 process_used
 * (bytes; UINT64_MAX = not measured). */
#define MD_CAP_SAMPLE_LEN (8 + 4 + 1 + 6 * 8)
_Static_assert(MD_CAP_SAMPLE_LEN == 61, "sample record size is part of the format");
#define MD_CAP_DEVICE_SAMPLE_LEN (4 + MD_CAP_SAMPLE_LEN)

#define MD_CAP_PROCESSES_FIXED (8 + 4 + 4)
#define MD_CAP_PROCESS_FIXED (4 + 4 + 8)
#define MD_CAP_MAX_PROCESSES 64

#define MD_CAP_NA UINT64_MAX

#endif
