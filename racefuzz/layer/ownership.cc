#include "ownership.h"

namespace rflayer {

namespace {
constexpr size_t kFreedKept = 4096;  // freed blocks remembered for use-after-free reports
}

std::string Owner::Describe() const {
  std::string who = ep == 0 ? "the factory" : "EP #" + std::to_string(ep);
  return backend.empty() ? who : who + " (backend " + backend + ")";
}

Ownership& Ownership::Get() {
  static Ownership* one = new Ownership();  // never destroyed: EPs call in during exit
  return *one;
}

uint64_t Ownership::NewId() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_id_++;
}

uint64_t Ownership::Created(const std::string& scope, const std::string& backend) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t ep = next_ep_++;
  alive_[ep] = {scope, backend};
  backends_[scope].insert(backend);
  return ep;
}

void Ownership::Released(uint64_t ep) {
  std::lock_guard<std::mutex> lock(mu_);
  alive_.erase(ep);
}

std::set<std::string> Ownership::BackendsEver(const std::string& scope) {
  std::lock_guard<std::mutex> lock(mu_);
  return backends_[scope];
}

void Ownership::Allocated(void* p, size_t size, uint64_t allocator, const Owner& owner,
                          const std::string& scope) {
  if (p == nullptr) return;
  Block b;
  b.start = reinterpret_cast<uintptr_t>(p);
  b.size = size;
  b.allocator = allocator;
  b.owner = owner;
  b.scope = scope;
  std::lock_guard<std::mutex> lock(mu_);
  freed_.erase(b.start);  // the address is reused: the old history no longer applies
  live_[b.start] = b;
}

std::string Ownership::Freed(void* p, uint64_t allocator, const std::string& allocator_owner) {
  if (p == nullptr) return "";
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(at);
  if (it == live_.end()) {
    auto old = freed_.find(at);
    if (old != freed_.end())
      return "double-free:a block made by " + old->second.owner.Describe() +
             " freed again through the allocator of " + allocator_owner;
    return "";  // not one the layer saw made (before it loaded, or by ORT): nothing to say
  }
  Block b = it->second;
  live_.erase(it);
  b.freed_by = allocator;
  freed_[at] = b;
  freed_order_.push_back(at);
  if (freed_order_.size() > kFreedKept) {
    freed_.erase(freed_order_.front());
    freed_order_.erase(freed_order_.begin());
  }
  if (b.allocator != allocator)
    return "foreign-free:a block made by the allocator of " + b.owner.Describe() +
           " freed through the allocator of " + allocator_owner;
  return "";
}

std::optional<Owner> Ownership::SharedWith(const void* real, const Owner& owner) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = handed_.emplace(real, owner);
  if (fresh || it->second.ep == owner.ep) return std::nullopt;
  Owner first = it->second;
  if (first.ep == 0 || first.backend == owner.backend) {
    it->second = owner;  // e.g. handed out again after the first owner's release
    return std::nullopt;
  }
  return first;
}

void Ownership::Forget(const void* real) {
  std::lock_guard<std::mutex> lock(mu_);
  handed_.erase(real);
}

std::optional<Block> Ownership::FindIn(std::map<uintptr_t, Block>& blocks, uintptr_t p) {
  auto exact = blocks.find(p);  // opaque handles (small integers) are looked up exactly
  if (exact != blocks.end()) return exact->second;
  auto it = blocks.upper_bound(p);
  if (it == blocks.begin()) return std::nullopt;
  --it;
  if (p < it->second.start + it->second.size) return it->second;
  return std::nullopt;
}

std::optional<Block> Ownership::Find(const void* p, bool* freed) {
  uintptr_t at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  *freed = false;
  if (auto b = FindIn(live_, at)) return b;
  if (auto b = FindIn(freed_, at)) {
    *freed = true;
    return b;
  }
  return std::nullopt;
}

}  // namespace rflayer
