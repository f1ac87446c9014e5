// Two checks that every copy and every launch makes before it touches device memory, called from
// devices::CheckBlock for each device operand: the pool index that finds a block's pool, and the
// backend's device context. Fixed, both always pass.
//
// Not seed behaviours. Each switch here is one defect in one helper that every op touching device
// memory reaches (run, run_bound, run_async, copy, read, feed, ...): the op in flight differs, the
// faulting frame or the message does not. They exist to test racefuzz's deduplication against one
// root cause seen through many ops: a crash (B19) and an error status (B20).
#pragma once

#include "onnxruntime_c_api.h"

namespace testbed {

class Backend;

namespace shared {

// B19: looks the block up in the pool index, which exists only for the first backend that checked
// a block; the other backend's lookup dereferences a null index (SIGSEGV in this function).
void FindPool(const Backend& backend, const void* block);

// B20: fails once a release of any session of `backend` destroyed the context the backend's
// sessions share, until the next CreateEp of that backend makes a new one.
OrtStatus* CheckContext(const Backend& backend);
void SessionCreated(const Backend* backend);
void SessionReleased(const Backend* backend);

}  // namespace shared
}  // namespace testbed
