// racefuzz's EP-ABI validation layer: shared declarations.
//
// The layer is a plugin EP library that loads the real one and hands ORT a proxy for every ABI
// object the real library returns (factories, EPs, node compute infos, data transfers,
// allocators, sync streams), forwarding each call unchanged. On the way it keeps an ownership
// model (`ownership.h`: which allocator of which EP made each block, which backend that EP
// serves) and reports calls that break it (`report.h`). Like Vulkan's validation layers it
// changes nothing the EP computes; unlike them it knows nothing of any EP's internals.
//
// A proxy sets a function pointer only where the real object has one and its declared
// `ort_version_supported` covers that field (a field added after the version an EP was built
// for is garbage in its struct), and declares min(real version, ORT_API_VERSION).
#pragma once

#include <cstdint>
#include <string>

#include "onnxruntime_c_api.h"

namespace rflayer {

// ORT's own tables, which the layer itself calls.
struct Apis {
  const OrtApi* ort = nullptr;
  const OrtEpApi* ep = nullptr;
};
extern Apis g_api;

// ORT version numbers at which each proxied field was added (from the API 29 headers).
constexpr uint32_t kV22 = 22, kV23 = 23, kV24 = 24, kV25 = 25, kV26 = 26, kV27 = 27, kV28 = 28,
                   kV29 = 29;

inline uint32_t Declared(uint32_t real) { return real < ORT_API_VERSION ? real : ORT_API_VERSION; }

// In a proxy's constructor, with the real object `real` and its declared version `v` in scope:
// the proxy's `field` is `impl` where the real object has that field (added at or before `v`,
// and set), else null, as ORT expects of an absent function.
#define RF_WIRE(field, impl, since) \
  field = (v >= (since) && real->field != nullptr) ? impl : nullptr

// The OS thread id, as Python's threading.get_native_id() gives it.
uint64_t ThreadId();

// A device key for reports and ownership: "GPU:0x1002:0:default".
std::string DeviceKey(const OrtMemoryDevice* device);

}  // namespace rflayer
