// White-box trace for racefuzz's `misroute` oracle and for reports.
//
// RACEFUZZ_TESTBED_TRACE=<file> (read once at load) appends one JSON object per line for every
// device allocation, copy and compute launch: the backend that served it, the backend that owns
// each device buffer it touched, and whether those differ (`misroute`). Lines are written whole
// under a lock and flushed, so a crash loses at most the line being written. Without the variable
// nothing is formatted at all. The trace never changes behaviour: every bug is also visible
// black-box.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace testbed {
namespace trace {

// One side of a copy or one operand of a compute: who owns it and whether it is device memory.
struct Buffer {
  std::string owner;  // "dml", "mgx", "host", or "unknown" for device memory no backend owns
  bool device = false;
};

bool On();

// The OS thread id (what Python's threading.get_native_id() reports).
uint64_t ThreadId();

// `session` 0 means env-level (no session): written as null. An allocation is a misroute when it is
// served by a backend other than its session's own (`session_backend`, null for env-level).
void Alloc(const char* backend, int64_t session, const char* session_backend, size_t bytes, bool misroute);
void Copy(const char* backend, int64_t session, const Buffer& src, const Buffer& dst, size_t bytes,
          bool misroute);
void Compute(const char* backend, int64_t session, const std::vector<Buffer>& inputs,
             const std::vector<Buffer>& outputs, bool misroute);

}  // namespace trace
}  // namespace testbed
