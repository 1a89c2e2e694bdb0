/* profile.h: CUDA events on a context's stream, for timing operations
 * (kernels/profile through kernels/cuda's profile_device.go). The real
 * build only: profile.cu is compiled by nvcc and not by the emulated build,
 * whose launches run synchronously on the host and are timed by the wall
 * clock instead. Failures are returned with the runtime's message in err,
 * not recorded as the context's sticky error: a profiler that cannot time
 * must not stop the work it times. */
#ifndef HONE_PROFILE_H
#define HONE_PROFILE_H

#include <stddef.h>

#include "hone_cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* hone_event_record records an event on c's stream after the work queued
 * so far, creating it first when *ev is NULL (cudaEventDefault: timing on). */
int hone_event_record(hone_ctx* c, void** ev, char* err, size_t errlen);
/* hone_event_ms waits for end and stores the milliseconds from start to end. */
int hone_event_ms(void* start, void* end, float* ms, char* err, size_t errlen);
void hone_event_destroy(void* ev);

#ifdef __cplusplus
}
#endif

#endif
