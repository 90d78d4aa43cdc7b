/* fake_cupti.c - a stand-in for libcupti with the two calls the driver
 * tracer makes, so CI (no GPU) can drive its callback: fake_cupti_fire
 * calls what cuptiSubscribe registered, as the driver would at a call's
 * exit. FAKE_CUPTI_BUSY=1 answers as CUPTI does when another tool holds
 * it (39, CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED). */
#include <stdint.h>
#include <stdlib.h>

typedef void (*cb_fn)(void *user, int domain, uint32_t cbid, const void *data);
static cb_fn cb;
static void *cb_user;
static unsigned char enabled[1024];

int cuptiSubscribe(void **sub, cb_fn fn, void *user);
int cuptiEnableCallback(uint32_t on, void *sub, int domain, uint32_t cbid);
int cuptiUnsubscribe(void *sub);
void fake_cupti_fire(uint32_t cbid, const void *data);
int fake_cupti_enabled(uint32_t cbid);

int cuptiSubscribe(void **sub, cb_fn fn, void *user)
{
    const char *busy = getenv("FAKE_CUPTI_BUSY");
    if (busy && *busy == '1')
        return 39;
    cb = fn;
    cb_user = user;
    *sub = &cb;
    return 0;
}

int cuptiEnableCallback(uint32_t on, void *sub, int domain, uint32_t cbid)
{
    if (sub != &cb || domain != 1 || cbid >= sizeof enabled)
        return 1;
    enabled[cbid] = (unsigned char)on;
    return 0;
}

int cuptiUnsubscribe(void *sub)
{
    if (sub != &cb)
        return 1;
    cb = NULL;
    return 0;
}

void fake_cupti_fire(uint32_t cbid, const void *data)
{
    if (cb && cbid < sizeof enabled && enabled[cbid])
        cb(cb_user, 1, cbid, data);
}

int fake_cupti_enabled(uint32_t cbid)
{
    return cbid < sizeof enabled && enabled[cbid];
}
