// The library's two entry points: CreateEpFactories loads the real EP library named in the
// environment (RACEFUZZ_LAYER_<NAME> = "library=PATH;backend_option=KEY", NAME the registered
// name upper-cased, other characters '_') and hands ORT a proxy for each factory it returns;
// ReleaseEpFactory gives each back.
#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "entry.h"
#include "proxies.h"
#include "report.h"

namespace rflayer {

Apis g_api;

uint64_t ThreadId() { return static_cast<uint64_t>(syscall(SYS_gettid)); }

std::string DeviceKey(const OrtMemoryDevice* device) {
  if (device == nullptr) return "none";
  char buf[64];
  std::snprintf(buf, sizeof buf, "0x%04x:%u", g_api.ep->MemoryDevice_GetVendorId(device),
                g_api.ep->MemoryDevice_GetDeviceId(device));
  return buf;
}

namespace {

std::mutex g_mu;


// The library stays loaded (ORT unloads it on unregister): the real EP may keep the OrtApi
// pointer it was given, and that table lives here.
__attribute__((constructor)) void PinSelf() {
  Dl_info self{};
  if (dladdr(reinterpret_cast<void*>(&PinSelf), &self) != 0 && self.dli_fname != nullptr)
    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

std::string Setting(const std::string& config, const std::string& key) {
  size_t at = 0;
  while (at <= config.size()) {
    size_t end = config.find(';', at);
    if (end == std::string::npos) end = config.size();
    std::string part = config.substr(at, end - at);
    if (part.compare(0, key.size() + 1, key + "=") == 0) return part.substr(key.size() + 1);
    at = end + 1;
  }
  return "";
}

OrtStatus* Fail(const OrtApiBase* base, const std::string& what) {
  const OrtApi* api = base->GetApi(ORT_API_VERSION);
  std::string text = "racefuzz layer: " + what;
  return api != nullptr ? api->CreateStatus(ORT_FAIL, text.c_str()) : nullptr;
}

}  // namespace
}  // namespace rflayer

using namespace rflayer;

extern "C" OrtStatus* CreateEpFactories(const char* name, const OrtApiBase* base,
                                        const OrtLogger* logger, OrtEpFactory** factories,
                                        size_t max_factories, size_t* num_factories) {
  *num_factories = 0;
  g_api.ort = base->GetApi(ORT_API_VERSION);
  if (g_api.ort == nullptr) return nullptr;  // ORT older than the headers: nothing to offer
  g_api.ep = g_api.ort->GetEpApi();
  std::string var = "RACEFUZZ_LAYER_";
  for (const char* c = name; *c != '\0'; c++)
    var += std::isalnum(static_cast<unsigned char>(*c)) ? static_cast<char>(std::toupper(*c)) : '_';
  const char* config = std::getenv(var.c_str());
  if (config == nullptr) return Fail(base, "no " + var + " in the environment");
  auto* reg = new Registration();
  reg->name = name;
  reg->library = Setting(config, "library");
  reg->backend_option = Setting(config, "backend_option");
  if (reg->library.empty()) return Fail(base, var + " names no library");
  reg->handle = dlopen(reg->library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (reg->handle == nullptr) return Fail(base, dlerror());
  auto create = reinterpret_cast<CreateFn>(dlsym(reg->handle, "CreateEpFactories"));
  reg->release = reinterpret_cast<ReleaseFn>(dlsym(reg->handle, "ReleaseEpFactory"));
  if (create == nullptr || reg->release == nullptr) {
    dlclose(reg->handle);
    return Fail(base, reg->library + " is not an EP library (no CreateEpFactories)");
  }
  if (create == &CreateEpFactories) {  // the layer in front of itself would recurse forever
    dlclose(reg->handle);
    return Fail(base, var + " names the layer itself, not the EP library behind it");
  }
  OrtStatus* status =
      create(name, LayerApiBase(base), logger, factories, max_factories, num_factories);
  if (status != nullptr) return status;
  std::lock_guard<std::mutex> lock(g_mu);
  for (size_t i = 0; i < *num_factories; i++) {
    auto* proxy = new ProxyFactory(factories[i], reg);
    reg->proxies.push_back(proxy);
    factories[i] = proxy;
  }
  return nullptr;
}

extern "C" OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
  if (factory == nullptr || !IsProxy(factory)) return nullptr;
  auto* proxy = static_cast<ProxyFactory*>(factory);
  if (proxy->released.exchange(true)) return nullptr;
  Registration* reg = proxy->reg;
  // ORT releases every session before its library (the contract racefuzz checks): an EP alive
  // now is one the application or ORT never released, and its next call reaches a dead factory.
  for (ProxyEp* ep : proxy->Alive())
    Report("alive-at-release", "ReleaseEpFactory",
           ep->owner.Describe() + " was never released before its factory");
  OrtStatus* status = reg->release(proxy->real);
  std::lock_guard<std::mutex> lock(g_mu);
  // The proxy stays (EP objects may still point at it); the registration's real library is
  // closed with its last factory, as ORT closes a library it loaded itself.
  bool live = false;
  for (OrtEpFactory* f : reg->proxies) live = live || !static_cast<ProxyFactory*>(f)->released;
  if (!live && reg->handle != nullptr) {
    dlclose(reg->handle);
    reg->handle = nullptr;
  }
  return status;
}
