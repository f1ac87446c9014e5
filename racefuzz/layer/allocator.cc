// The proxy OrtAllocator: tags every block it hands out with its owner, and checks every free.
#include "proxies.h"
#include "report.h"

namespace rflayer {

namespace {

ProxyAllocator* Self(const OrtAllocator* a) {
  return static_cast<ProxyAllocator*>(const_cast<OrtAllocator*>(a));
}

// A factory allocator serves every session of its library: its block is tagged with the
// backend of the EPs the library made when they are all one, else with none.
void* Made(ProxyAllocator* p, void* block, size_t size) {
  Owner owner = p->owner;
  if (owner.ep == 0) {
    std::set<std::string> ever = Ownership::Get().BackendsEver(p->scope);
    if (ever.size() == 1) owner.backend = *ever.begin();
  }
  Ownership::Get().Allocated(block, size, p->id, owner, p->scope);
  return block;
}

void* ORT_API_CALL AllocImpl(OrtAllocator* a, size_t size) noexcept {
  auto* p = Self(a);
  return Made(p, p->real->Alloc(p->real, size), size);
}

void ORT_API_CALL FreeImpl(OrtAllocator* a, void* block) noexcept {
  auto* p = Self(a);
  std::string problem = Ownership::Get().Freed(block, p->id, p->owner.Describe());
  if (!problem.empty()) {
    size_t colon = problem.find(':');
    Report(problem.substr(0, colon), "Free", problem.substr(colon + 1));
    if (problem.rfind("double-free", 0) == 0) return;  // a second free would corrupt the EP's heap
  }
  p->real->Free(p->real, block);
}

const OrtMemoryInfo* ORT_API_CALL InfoImpl(const OrtAllocator* a) noexcept {
  return Self(a)->real->Info(Self(a)->real);
}

void* ORT_API_CALL ReserveImpl(OrtAllocator* a, size_t size) noexcept {
  auto* p = Self(a);
  return Made(p, p->real->Reserve(p->real, size), size);
}

OrtStatus* ORT_API_CALL StatsImpl(const OrtAllocator* a, OrtKeyValuePairs** out) noexcept {
  return Self(a)->real->GetStats(Self(a)->real, out);
}

void* ORT_API_CALL AllocOnStreamImpl(OrtAllocator* a, size_t size, OrtSyncStream* stream) noexcept {
  auto* p = Self(a);
  return Made(p, p->real->AllocOnStream(p->real, size, stream), size);
}

OrtStatus* ORT_API_CALL ShrinkImpl(OrtAllocator* a) noexcept {
  return Self(a)->real->Shrink(Self(a)->real);
}

}  // namespace

ProxyAllocator::ProxyAllocator(OrtAllocator* real_allocator, Owner o, std::string sc)
    : OrtAllocator{},
      real(real_allocator),
      owner(std::move(o)),
      scope(std::move(sc)),
      id(Ownership::Get().NewId()) {
  const uint32_t v = real->version;
  version = Declared(v);
  RF_WIRE(Alloc, AllocImpl, 1);
  RF_WIRE(Free, FreeImpl, 1);
  RF_WIRE(Info, InfoImpl, 1);
  RF_WIRE(Reserve, ReserveImpl, 18);
  RF_WIRE(GetStats, StatsImpl, kV23);
  RF_WIRE(AllocOnStream, AllocOnStreamImpl, kV23);
  RF_WIRE(Shrink, ShrinkImpl, kV25);
  const OrtMemoryInfo* info = real->Info != nullptr ? real->Info(real) : nullptr;
  device = info != nullptr ? DeviceKey(g_api.ep->MemoryInfo_GetMemoryDevice(info)) : "none";
  Remember(this);
}

}  // namespace rflayer
