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
  // The backends the block may belong to: its EP's; for a factory block, those alive on its
  // device when it was made. A shared (factory) object that handles it may be serving any
  // backend created on that device since, too.
  std::set<std::string> maybe = made.ep != 0 ? std::set<std::string>{made.backend}
                                             : block->alive_backends;
  if (maybe.empty()) return;  // made before any EP: nothing to hold it to
  if (!factory_level && !handler.backend.empty()) {
    if (made.ep != 0 && made.backend != handler.backend) {
      Report("misroute", call,
             std::string(role) + " is memory of " + made.Describe() + ", handled by " +
                 handler.Describe());
    } else if (made.ep == 0 && (maybe.size() > 1 || *maybe.begin() != handler.backend)) {
      // Messages stay under 160 characters and free of quotes: racefuzz clusters on them.
      Report("misroute", call,
             std::string(role) + " came from the shared allocator while " + Join(maybe) +
                 " shared the device, handled by " + handler.Describe());
    }
    return;
  }
  for (const auto& other : Ownership::Get().OtherBackendsSince(block->device, block->epoch, ""))
    maybe.insert(other);
  if (maybe.size() > 1)
    Report("misroute", call,
           std::string(role) +
               (made.ep != 0 ? " is memory of backend " + made.backend
                : made.backend.empty() ? std::string(" came from the shared allocator")
                                       : " came from the shared allocator for " + made.backend) +
               ", handled by a shared object while " + Join(maybe) + " shared the device");
}

}  // namespace rflayer
