/* cupti_floor.c - what CUPTI's callbacks cost before any tracer work: an
 * injection library that subscribes to the driver's memory calls, as
 * memdiag's tracer does, with a callback that returns at once. Beside
 * bench/driver_cost.cu it splits a traced call's cost into CUPTI's and
 * memdiag's (tests/gpu/driver.sh, FLOOR=1).
 *   cc -O2 -fPIC -shared -o build/libcupti_floor.so bench/cupti_floor.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>

static void empty(void *u, int domain, uint32_t cbid, const void *data)
{
    (void)u, (void)domain, (void)cbid, (void)data;
}

int InitializeInjection(void);

int InitializeInjection(void)
{
    static const uint32_t cbids[] = {243, 244, 245, 371, 549, 550, 598, 599, 600, 601, 611, 612};
    const char *env = getenv("MEMDIAG_CUPTI");
    void *h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!h && env)
        h = dlopen(env, RTLD_NOW | RTLD_GLOBAL);
    if (!h)
        h = dlopen("libcupti.so.13", RTLD_NOW | RTLD_GLOBAL);
    int (*subscribe)(void **, void (*)(void *, int, uint32_t, const void *), void *) =
        h ? (int (*)(void **, void (*)(void *, int, uint32_t, const void *), void *))dlsym(h, "cuptiSubscribe") : NULL;
    int (*enable)(uint32_t, void *, int, uint32_t) =
        h ? (int (*)(uint32_t, void *, int, uint32_t))dlsym(h, "cuptiEnableCallback") : NULL;
    void *sub;
    if (!subscribe || !enable || subscribe(&sub, empty, NULL))
        return 1;
    for (size_t i = 0; i < sizeof cbids / sizeof cbids[0]; i++)
        enable(1, sub, 1, cbids[i]);
    return 1;
}
