/* nvml.c - device memory through NVML, loaded with dlopen so memdiag
 * neither links against the driver nor creates a CUDA context (a fresh
 * thread calling cudaMemGetInfo would create one: hundreds of MiB).
 * The loaded library is process-wide state of the capture runtime,
 * initialised once. Structs are declared here from nvml.h (NVML 12/13). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "memdiag.h"

typedef void *nvml_device;
typedef struct { unsigned long long total, free, used; } nvml_memory;
/* v2 reports the driver's own reservation apart (615 MiB on an H200 with
 * driver 580): v1's used counts it, nvidia-smi's used does not. */
typedef struct {
    unsigned version;
    unsigned long long total, reserved, free, used;
} nvml_memory_v2;
#define NVML_MEMORY_V2 ((unsigned)(sizeof(nvml_memory_v2) | (2u << 24)))
typedef struct {
    unsigned pid;
    unsigned long long used_gpu_memory;
    unsigned gpu_instance_id, compute_instance_id;
} nvml_process_v3;

static struct {
    int ok;
    int (*init)(void);
    int (*by_pci)(const char *, nvml_device *);
    int (*memory)(nvml_device, nvml_memory *);
    int (*memory_v2)(nvml_device, nvml_memory_v2 *);
    int (*procs)(nvml_device, unsigned *, nvml_process_v3 *);
} nv;
static pthread_once_t nv_once = PTHREAD_ONCE_INIT;

static void nv_load(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&nv.init = dlsym(h, "nvmlInit_v2");
    *(void **)&nv.by_pci = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nv.memory = dlsym(h, "nvmlDeviceGetMemoryInfo");
    *(void **)&nv.memory_v2 = dlsym(h, "nvmlDeviceGetMemoryInfo_v2");
    *(void **)&nv.procs = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    nv.ok = nv.init && nv.by_pci && nv.memory && nv.init() == 0;
}

int md_nvml_memory(const char *pci_bus_id, uint64_t *used, uint64_t *total,
                   uint64_t *process_used)
{
    nvml_device dev;
    nvml_memory m;
    nvml_memory_v2 m2 = {.version = NVML_MEMORY_V2};
    pthread_once(&nv_once, nv_load);
    *used = *total = *process_used = UINT64_MAX;
    if (!nv.ok || !pci_bus_id || nv.by_pci(pci_bus_id, &dev) != 0)
        return -1;
    if (nv.memory_v2 && nv.memory_v2(dev, &m2) == 0 && m2.total >= m2.reserved) {
        *used = m2.used; /* what nvidia-smi shows as used */
        *total = m2.total - m2.reserved;
    } else if (nv.memory(dev, &m) == 0) {
        *used = m.used;
        *total = m.total;
    } else {
        return -1;
    }
    if (nv.procs) {
        nvml_process_v3 p[64];
        unsigned n = 64;
        if (nv.procs(dev, &n, p) == 0) {
            unsigned me = (unsigned)getpid();
            for (unsigned i = 0; i < n && i < 64; i++)
                if (p[i].pid == me)
                    *process_used = p[i].used_gpu_memory;
        }
    }
    return 0;
}

/* /proc/PID's command line (argv[0] without its directory, arguments
 * joined by spaces) and parent: what
 * a report can name another process by; left empty and 0 where the
 * process is in another PID namespace. */
static void describe(md_gpu_process *p)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%u/cmdline", p->pid);
    FILE *f = fopen(path, "re");
    if (f) {
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *slash = strrchr(buf, '/'); /* in argv[0]: its directory takes room */
        const char *start = slash ? slash + 1 : buf;
        n -= (size_t)(start - buf);
        size_t k = 0; /* arguments are NUL-separated; code given with -c holds newlines */
        for (size_t i = 0; i < n && k < sizeof p->name - 1; i++)
            p->name[k++] = (unsigned char)start[i] < 0x20 ? ' ' : start[i];
        while (k && p->name[k - 1] == ' ')
            k--;
        p->name[k] = 0;
    }
    snprintf(path, sizeof path, "/proc/%u/stat", p->pid);
    f = fopen(path, "re");
    if (!f)
        return;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *close = strrchr(buf, ')'); /* the name may hold spaces and parentheses */
    unsigned ppid;
    if (close && sscanf(close + 1, " %*c %u", &ppid) == 1)
        p->ppid = ppid;
}

int md_nvml_processes(const char *pci_bus_id, md_gpu_process *out, int max)
{
    nvml_device dev;
    nvml_process_v3 p[64];
    unsigned n = 64;
    pthread_once(&nv_once, nv_load);
    if (!nv.ok || !nv.procs || !pci_bus_id || nv.by_pci(pci_bus_id, &dev) != 0 ||
        nv.procs(dev, &n, p) != 0)
        return -1;
    unsigned me = (unsigned)getpid();
    int k = 0;
    for (unsigned i = 0; i < n && i < 64 && k < max; i++) {
        if (p[i].pid == me)
            continue;
        memset(&out[k], 0, sizeof out[k]);
        out[k].pid = p[i].pid;
        out[k].used = p[i].used_gpu_memory; /* NVML's "not available" is 2^64-1 too */
        describe(&out[k++]);
    }
    return k;
}
