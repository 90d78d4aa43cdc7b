/* model.h - internal interface of the replay model. */
#ifndef MD_MODEL_H
#define MD_MODEL_H

#include "memdiag.h"

/* torch's round_size(): the block size a request of `size` bytes gets. */
uint64_t md_round_size(const md_settings *cfg, uint64_t size);
const md_event *md_replay_events(const md_replay *r);
int md_replay_device(const md_replay *r);

#endif
