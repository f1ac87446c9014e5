#include "allocator.h"

#include <string>

#include "backends/backend.h"
#include "devices.h"
#include "factory.h"
#include "status.h"
#include "stream.h"
#include "trace.h"

namespace testbed {

BackendAllocator::BackendAllocator(TestbedFactory& factory, Backend* bound, AllocatorOwner owner, Placement placement)
    : OrtAllocator{}, factory_(factory), bound_(bound), owner_(owner), placement_(placement) {
  version = ORT_API_VERSION;
  Alloc = AllocImpl;
  Free = FreeImpl;
  Info = InfoImpl;
  Reserve = AllocImpl;  // no arena behind it: a reservation is an allocation
  AllocOnStream = AllocOnStreamImpl;
  factory_.Ref();
}

BackendAllocator::~BackendAllocator() { factory_.Unref(); }

Backend* BackendAllocator::Resolve() const {
  // gpu_ep::Allocator::GetBackendAllocator(): re-read the shared slot on every call. The seed kept
  // this lazy on purpose for the factory allocator (shared, no session to pin to); B4 is what
  // happens when sessions use it too.
  return bound_ != nullptr ? bound_ : slot::Read().allocator_backend;
}

void* ORT_API_CALL BackendAllocator::AllocImpl(OrtAllocator* this_ptr, size_t size) noexcept {
  auto* self = static_cast<BackendAllocator*>(this_ptr);
  try {
    Backend* backend = self->Resolve();
    if (backend == nullptr) {
      self->factory_.LogError(
          "RacefuzzTestbed: no backend has been selected yet; create a session before allocating device memory.");
      return nullptr;
    }
    std::string error;
    void* p = backend->Alloc(size, error);
    if (p == nullptr) {
      self->factory_.LogError(error);
      return nullptr;
    }
    devices::Record(p, self->placement_.device, self->placement_.pool_session);
    const bool misroute = self->owner_.session_backend != nullptr && self->owner_.session_backend != backend;
    const char* session_backend = self->owner_.session_backend ? self->owner_.session_backend->name() : nullptr;
    trace::Alloc(backend->name(), self->owner_.session, session_backend, size, misroute);
    return p;
  } catch (...) {
    return nullptr;  // ORT turns a null allocation into its own error
  }
}

void ORT_API_CALL BackendAllocator::FreeImpl(OrtAllocator* this_ptr, void* p) noexcept {
  auto* self = static_cast<BackendAllocator*>(this_ptr);
  if (p == nullptr) return;
  // Following the slot, this may be the wrong backend: the free is then ignored and the memory
  // leaks, which is what a mis-routed hipFree or DML release does.
  try {
    devices::Forget(p);  // first: once freed, the address may be handed out again at once
    if (Backend* backend = self->Resolve()) backend->Free(p);
  } catch (...) {
    // nothing can be reported from Free; the block leaks
  }
}

void* ORT_API_CALL BackendAllocator::AllocOnStreamImpl(OrtAllocator* this_ptr, size_t size,
                                                       OrtSyncStream* stream) noexcept {
  // As a stream-ordered allocator does (hipMallocAsync then hipMemsetAsync): the buffer is
  // cleared on the stream it was asked for, so work ordered on that stream sees it cleared and
  // anything written past the stream's order (B12) is overwritten when the fill lands.
  void* p = AllocImpl(this_ptr, size);
  if (p == nullptr) return nullptr;
  try {
    if (Backend* backend = static_cast<BackendAllocator*>(this_ptr)->Resolve()) {
      backend->ZeroFillOnQueue(p, size, StreamImpl::QueueOf(stream));
    }
  } catch (...) {
    // the block is zero-filled at allocation already; a fill that could not be queued changes nothing
  }
  return p;
}

const OrtMemoryInfo* ORT_API_CALL BackendAllocator::InfoImpl(const OrtAllocator* this_ptr) noexcept {
  const auto* self = static_cast<const BackendAllocator*>(this_ptr);
  return self->factory_.memory_info(self->placement_.label);
}

}  // namespace testbed
