// Device allocators ORT receives from the factory and from the EP.
//
// One class, two bindings, as in the seed:
// - bound to one backend: what OrtEp::CreateAllocator returns in the fixed design (the backend's
//   own OrtEp hook for DirectML, its factory allocator for MIGraphX; both resolve per EP);
// - following the slot: the seed's gpu_ep::Allocator, whose GetBackendAllocator() re-reads the
//   shared slot on every Alloc and Free. The factory's CreateAllocator returns this one: ORT uses it
//   for the environment's shared allocator (no session to resolve against, residual R1) and, when
//   B4 leaves OrtEp::CreateAllocator unset, for every session.
#pragma once

#include <cstdint>

#include "onnxruntime_c_api.h"

namespace testbed {

class Backend;
class TestbedFactory;

// Whose allocator this is, for the trace: the session (0 = env-level) and that session's backend,
// so that an allocation served by another backend is reported as a misroute.
struct AllocatorOwner {
  int64_t session = 0;
  Backend* session_backend = nullptr;
};

// Where an allocator's blocks go (devices.h): the device its Info labels them with, the device
// whose pool really holds them (they differ only under B16), and the session pool they are
// registered in (0: the environment's).
struct Placement {
  int label = 0;
  int device = 0;
  int64_t pool_session = 0;
};

class BackendAllocator : public OrtAllocator {
 public:
  // `bound` null: follow the slot.
  BackendAllocator(TestbedFactory& factory, Backend* bound, AllocatorOwner owner, Placement placement = {});
  ~BackendAllocator();
  BackendAllocator(const BackendAllocator&) = delete;
  BackendAllocator& operator=(const BackendAllocator&) = delete;

  // The environment's allocator of a device (no session's): counted per device (devices.h).
  bool env_level() const { return owner_.session == 0 && placement_.pool_session == 0; }
  int device() const { return placement_.device; }

 private:
  Backend* Resolve() const;

  static void* ORT_API_CALL AllocImpl(OrtAllocator* this_ptr, size_t size) noexcept;
  static void ORT_API_CALL FreeImpl(OrtAllocator* this_ptr, void* p) noexcept;
  static void* ORT_API_CALL AllocOnStreamImpl(OrtAllocator* this_ptr, size_t size, OrtSyncStream* stream) noexcept;
  static const OrtMemoryInfo* ORT_API_CALL InfoImpl(const OrtAllocator* this_ptr) noexcept;

  TestbedFactory& factory_;
  Backend* const bound_;
  const AllocatorOwner owner_;
  const Placement placement_;
};

}  // namespace testbed
