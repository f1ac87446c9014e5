// The device model behind the EP: what a backend (DirectML or MIGraphX in the seed) offers.
//
// A backend owns device memory, copies between it and the host, and launches compiled programs
// on it. Backends are process-wide singletons that are never destroyed (the library is pinned),
// so memory allocated through one stays valid after the factory that handed it out is gone.
// A backend knows nothing about sessions, slots or bug switches except where its own behaviour
// is the bug (MIGraphX stream ordering, B7); routing decisions are made by its callers.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "../kernels.h"
#include "onnxruntime_c_api.h"

namespace testbed {

class WorkQueue;

// One operand of a launch: a device pointer and the shape it holds.
struct DeviceTensor {
  const void* data;
  Shape shape;
};

class Backend {
 public:
  explicit Backend(const char* name) : name_(name) {}
  virtual ~Backend() = default;
  Backend(const Backend&) = delete;
  Backend& operator=(const Backend&) = delete;

  // "dml" or "mgx": the profile name, and the owner name in the trace.
  const char* name() const { return name_; }

  // True when `p` is device memory this backend handed out and has not freed.
  virtual bool Owns(const void* p) const = 0;

  // Zero-filled device memory, or null with a one-sentence reason in `error`.
  virtual void* Alloc(size_t bytes, std::string& error) = 0;
  // Memory this backend does not own is ignored (a mis-routed free leaks, as hipFree would).
  virtual void Free(void* p) = 0;
  // B23: a pool torn down under live tensors. Frees `p`'s memory at once where this build can
  // let a later use really read freed memory (true; Free stays valid), else does nothing (false)
  // and the caller marks the block, so that its next use faults as a GPU's illegal access does.
  virtual bool Drop(void* /*p*/) { return false; }

  // Copies `bytes` between host and device memory. `queue` is the stream the copy was issued on
  // when it must run there (an asynchronous backend returns before a host-to-device copy lands),
  // or null for a copy done at once (the caller has already waited for whatever it must).
  virtual OrtStatus* Copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes,
                          WorkQueue* queue) = 0;

  // Queues a zero fill of `bytes` at `p` on `queue` (hipMemsetAsync after an allocation on a
  // stream). Memory is zero-filled at allocation anyway: a synchronous backend has nothing to do.
  virtual void ZeroFillOnQueue(void* /*p*/, size_t /*bytes*/, WorkQueue* /*queue*/) {}

  // Runs `program` over device operands, on `queue` when given (asynchronously), else inline.
  virtual OrtStatus* Launch(const std::shared_ptr<const Program>& program, const std::vector<DeviceTensor>& inputs,
                            const std::vector<DeviceTensor>& outputs, WorkQueue* queue) = 0;

  // True when the backend implements its own OrtEp-level allocator hook (DirectML's per-session
  // DmlBucketizedBufferAllocator in the seed). MIGraphX and HIP do not: they implement
  // CreateAllocator on their factory only, so their hook is a null function pointer (see B6).
  virtual bool HasEpAllocatorHook() const = 0;

 private:
  const char* name_;
};

Backend& DmlBackend();  // backends/dml.cc
Backend& MgxBackend();  // backends/mgx.cc

// The backend a provider-option profile names, or null for an unknown profile.
inline Backend* BackendForProfile(const std::string& profile) {
  if (profile == "dml") return &DmlBackend();
  if (profile == "mgx") return &MgxBackend();
  return nullptr;
}

// Which backend owns a device pointer: "dml", "mgx", or "unknown".
inline const char* OwnerOf(const void* device_ptr) {
  if (DmlBackend().Owns(device_ptr)) return "dml";
  if (MgxBackend().Owns(device_ptr)) return "mgx";
  return "unknown";
}

}  // namespace testbed
