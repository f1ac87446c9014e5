// What the layer handed out: proxies by address, factories by their real object, and the EP a
// thread just created.
#include <mutex>
#include <set>
#include <unordered_map>

#include "proxies.h"

namespace rflayer {

namespace {
std::mutex g_mu;
std::set<const void*>& Proxies() {
  static auto* s = new std::set<const void*>();
  return *s;
}
std::unordered_map<OrtEpFactory*, OrtEpFactory*>& Factories() {
  static auto* m = new std::unordered_map<OrtEpFactory*, OrtEpFactory*>();
  return *m;
}
thread_local ProxyEp* t_just_created = nullptr;
}  // namespace

void Remember(const void* proxy) {
  std::lock_guard<std::mutex> lock(g_mu);
  Proxies().insert(proxy);
}

bool IsProxy(const void* p) {
  std::lock_guard<std::mutex> lock(g_mu);
  return Proxies().count(p) != 0;
}

void MapFactory(OrtEpFactory* real, OrtEpFactory* proxy) {
  std::lock_guard<std::mutex> lock(g_mu);
  Factories()[real] = proxy;
}

OrtEpFactory* ProxyOf(OrtEpFactory* real) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Factories().find(real);
  return it == Factories().end() ? real : it->second;
}

const OrtSyncStreamImpl* RealStream(const OrtSyncStreamImpl* impl) {
  return impl != nullptr && IsProxy(impl) ? static_cast<const ProxyStream*>(impl)->real : impl;
}

const OrtEp* RealEp(const OrtEp* ep) {
  return ep != nullptr && IsProxy(ep) ? static_cast<const ProxyEp*>(ep)->real : ep;
}

void SetJustCreated(ProxyEp* ep) { t_just_created = ep; }

ProxyEp* TakeJustCreated() {
  ProxyEp* ep = t_just_created;
  t_just_created = nullptr;
  return ep;
}

}  // namespace rflayer
