/* counting_malloc.h -- the counters of benchmarks/counting_malloc.c. */
#ifndef COUNTING_MALLOC_H
#define COUNTING_MALLOC_H

#include <stdint.h>

typedef struct counting_malloc {
    uint64_t allocs; /* malloc, calloc, realloc and aligned allocations, process-wide */
    uint64_t bytes;  /* bytes asked for by those calls */
    uint64_t frees;  /* free of a non-NULL pointer */
} counting_malloc_t;

void counting_malloc_stats(counting_malloc_t *out);

#endif
