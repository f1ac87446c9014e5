// The ownership checks on one device value: who made its block, and whether the object handling
// it may.
#include <set>
#include <string>
#include <vector>

#include "proxies.h"
#include "report.h"

namespace rflayer {

namespace {
std::string Join(const std::set<std::string>& backends) {
  std::string out = "backends ";
  for (const auto& b : backends) out += (out.size() > 9 ? " and " : "") + b;
  return out;
}
}  // namespace

void CheckValue(const OrtValue* value, const Owner& handler, bool factory_level, const char* call,
                const char* role) {
  if (value == nullptr) return;
  const OrtMemoryDevice* device = g_api.ep->Value_GetMemoryDevice(value);
  if (device == nullptr || g_api.ep->MemoryDevice_GetDeviceType(device) == OrtMemoryInfoDeviceType_CPU)
    return;  // host memory: anyone may touch it
  int is_tensor = 0;
  OrtStatus* status = g_api.ort->IsTensor(value, &is_tensor);
  if (status != nullptr) {
    g_api.ort->ReleaseStatus(status);
    return;
  }
  const void* data = nullptr;
  if (!is_tensor || (status = g_api.ort->GetTensorData(value, &data)) != nullptr) {
    if (status != nullptr) g_api.ort->ReleaseStatus(status);
    return;
  }
  if (data == nullptr) return;  // an empty tensor
  bool freed = false;
  auto block = Ownership::Get().Find(data, &freed);
  if (!block) return;  // not made by an allocator the layer saw: nothing to compare
  const Owner& made = block->owner;
  if (freed) {
    Report("use-after-free", call,
           std::string(role) + " is a block made by " + made.Describe() + " and already freed");
    return;
  }
  // A session's own object must get its own backend's memory; an object every session
  // shares cannot tell, once the library made EPs of two backends.
  std::set<std::string> ever = Ownership::Get().BackendsEver(block->scope);
  const bool shared_block = made.ep == 0;
  if (!factory_level && !handler.backend.empty()) {
    if (!shared_block && made.backend != handler.backend) {
      Report("misroute", call,
             std::string(role) + " is memory of " + made.Describe() + ", handled by " +
                 handler.Describe());
    } else if (shared_block && (ever.size() > 1 || ever.count(handler.backend) == 0)) {
      // Messages stay under 160 characters and free of quotes: racefuzz clusters on them.
      Report("misroute", call,
             std::string(role) + " came from the shared allocator of " + Join(ever) +
                 ", handled by " + handler.Describe());
    }
    return;
  }
  if (ever.size() > 1)
    Report("misroute", call,
           std::string(role) +
               (!shared_block ? " is memory of backend " + made.backend
                : made.backend.empty() ? std::string(" came from the shared allocator")
                                       : " came from the shared allocator for " + made.backend) +
               ", handled by a shared object of " + Join(ever));
}

}  // namespace rflayer
