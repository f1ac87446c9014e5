// The proxy of each ABI object the real library hands ORT. Each holds the real object and its
// owner, and is never freed: ORT (or a racy EP) may call an object after its release, and the
// layer must be able to say so instead of crashing in its own memory.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "layer.h"
#include "ownership.h"

namespace rflayer {

struct Registration;  // entry.cc: one registered library

struct ProxyEp;

struct ProxyFactory : OrtEpFactory {
  OrtEpFactory* real;
  Registration* reg;
  std::string scope;  // the real library's path: what shares its process-wide state
  std::atomic<bool> released{false};
  ProxyFactory(OrtEpFactory* real, Registration* reg);
  // The EPs it made that ORT has not released yet, checked when the factory is released.
  std::vector<ProxyEp*> Alive();
  void Made(ProxyEp* ep);
  std::mutex mu;
  std::vector<ProxyEp*> eps;
};

struct ProxyEp : OrtEp {
  OrtEp* real;
  ProxyFactory* factory;
  Owner owner;
  std::string device;
  std::atomic<bool> released{false};
  ProxyEp(OrtEp* real, ProxyFactory* factory, Owner owner, std::string device);
};

struct ProxyComputeInfo : OrtNodeComputeInfo {
  OrtNodeComputeInfo* real;
  ProxyEp* ep;
  ProxyComputeInfo(OrtNodeComputeInfo* real, ProxyEp* ep);
};

struct ProxyDataTransfer : OrtDataTransferImpl {
  OrtDataTransferImpl* real;
  Owner owner;  // ep 0: the registration-time (environment) instance
  std::atomic<bool> released{false};
  ProxyDataTransfer(OrtDataTransferImpl* real, Owner owner);
};

struct ProxyAllocator : OrtAllocator {
  OrtAllocator* real;
  Owner owner;
  std::string scope;  // the real library (its process-wide state is every factory's)
  uint64_t id;
  std::string device;
  ProxyAllocator(OrtAllocator* real, Owner owner, std::string scope);
};

struct ProxyStream : OrtSyncStreamImpl {
  OrtSyncStreamImpl* real;
  Owner owner;
  std::string device;
  std::atomic<bool> released{false};
  ProxyStream(OrtSyncStreamImpl* real, Owner owner, std::string device);
};

struct ProxyNotification : OrtSyncNotificationImpl {
  OrtSyncNotificationImpl* real;
  ProxyStream* stream;
  ProxyNotification(OrtSyncNotificationImpl* real, ProxyStream* stream);
};

// Calls `make(&real)` (the real object's creation); where it made one, `*out` is a new `Proxy`
// of it built from `args`. The shape of every callback that creates an ABI object.
template <class Proxy, class Real, class Make, class... Args>
OrtStatus* Wrapped(Real** out, Make make, Args&&... args) {
  *out = nullptr;
  Real* real = nullptr;
  OrtStatus* status = make(&real);
  if (status == nullptr && real != nullptr) *out = new Proxy(real, std::forward<Args>(args)...);
  return status;
}

// The real object behind what ORT hands the EP back (SyncStream_GetImpl, KernelInfo_GetEp,
// CreateEpDevice's factory), or the pointer itself when it is not one of the layer's proxies.
const OrtSyncStreamImpl* RealStream(const OrtSyncStreamImpl* impl);
const OrtEp* RealEp(const OrtEp* ep);
OrtEpFactory* ProxyOf(OrtEpFactory* real);

// Remembers what the layer handed out, for the lookups above.
void Remember(const void* proxy);
bool IsProxy(const void* p);
void MapFactory(OrtEpFactory* real, OrtEpFactory* proxy);

// The EP just created on this thread, for the per-session DataTransfer ORT asks the factory
// for right after CreateEp on the same thread (taken once).
void SetJustCreated(ProxyEp* ep);
ProxyEp* TakeJustCreated();

// Checks one device value a copy or a kernel touches, served by `handler` ("" backend: any).
void CheckValue(const OrtValue* value, const Owner& handler, bool factory_level,
                const char* call, const char* role);

}  // namespace rflayer
