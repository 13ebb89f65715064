/*
 * Private to loadgen/: what the workload generator (workload.c) takes from its configuration
 * (workload_config.c).
 */
#ifndef DS_LOADGEN_WORKLOAD_H
#define DS_LOADGEN_WORKLOAD_H

#include <stdint.h>

#include "loadgen/loadgen.h"

#define WORKLOAD_PERMILLE 1000u

/* Updates and duplicates of a stream: each round(events * fraction), but never all the lines
 * (the first one is a new order). Fractions must be in range. */
void workload_repeat_counts(const struct loadgen_workload_config *cfg, uint64_t *updates,
                            uint64_t *duplicates);
/* The flash-sale window's extra events: (flash_factor - 1) * rate_eps * flash_seconds / days,
 * rounded; 0 for the other profiles. Every field must be in range. */
uint64_t workload_flash_events(const struct loadgen_workload_config *cfg);

#endif /* DS_LOADGEN_WORKLOAD_H */
