#include "devices.h"

#include <array>
#include <atomic>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "backends/backend.h"
#include "bugs.h"
#include "shared_checks.h"
#include "status.h"

namespace testbed {
namespace devices {
namespace {

std::mutex g_mutex;
std::unordered_map<uintptr_t, Home> g_homes;
std::atomic<int> g_latched{-1};
std::array<int, kDeviceCount> g_env_allocators{};  // live environment allocators per device

bool IsMgx(const Backend& backend) { return std::strcmp(backend.name(), "mgx") == 0; }

// A pointer of another device: what hipMemcpy/hipLaunch say, or DML for a handle its own
// device's table does not hold.
OrtStatus* WrongDevice(const Backend& backend) {
  return Error(IsMgx(backend) ? "HIP failure 101: invalid device ordinal"
                              : "DML failure: 0x80070057 invalid allocation handle");
}

OrtStatus* ForeignPool(const Backend& backend) {
  return Error(IsMgx(backend) ? "HIP failure 1: invalid argument" : "DML failure: 0x80070057 invalid allocation handle");
}

// A block of a pool that was destroyed under it (B14): what HIP says of a handle it no longer
// knows (hipErrorInvalidHandle), or DML's E_HANDLE.
OrtStatus* RetiredPool(const Backend& backend) {
  return Error(IsMgx(backend) ? "HIP failure 400: invalid resource handle"
                              : "DML failure: 0x80070006 the handle is invalid");
}

// A block whose memory was freed under it (B23): a GPU's fault on an unmapped address, the
// same words from every copy and launch that touches it.
OrtStatus* IllegalAccess(const Backend& backend) {
  return Error(IsMgx(backend) ? "HIP failure 700: an illegal memory access was encountered"
                              : "DML failure: 0x887A0005 the GPU device instance has been suspended");
}

int LabelOf(const OrtValue* value) {
  return static_cast<int>(EpApi().MemoryDevice_GetDeviceId(EpApi().Value_GetMemoryDevice(value)));
}

// One device operand, labelled or launched on `device`: its block must still be in a live pool
// (B14) and in that device's.
OrtStatus* CheckBlock(const Backend& backend, const void* p, int device) {
  shared::FindPool(backend, p);                     // B19
  RETURN_IF_ERROR(shared::CheckContext(backend));  // B20
  const Home home = Of(p);
  if (home.retired) return RetiredPool(backend);
  if (home.dropped) return IllegalAccess(backend);
  if (home.device >= 0 && home.device != device) return WrongDevice(backend);
  return nullptr;
}

bool Known(int device) { return device >= 0 && device < kDeviceCount; }

}  // namespace

int Resolve(int requested) {
  if (!Enabled(Bug::kFirstDeviceLatched)) return requested;
  // B16, after the comment on onnxruntime#32561 (sessions pinned to different devices all ran on
  // the first): the first CreateEp's device is kept process-wide, as a hipSetDevice done once.
  int expected = -1;
  g_latched.compare_exchange_strong(expected, requested);
  return g_latched.load();
}

void Record(const void* p, int device, int64_t session) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_homes[reinterpret_cast<uintptr_t>(p)] = Home{device, session};
}

bool MarkWritten(const void* p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_homes.find(reinterpret_cast<uintptr_t>(p));
  if (it == g_homes.end()) return false;
  return std::exchange(it->second.written, true);
}

void Forget(const void* p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_homes.erase(reinterpret_cast<uintptr_t>(p));
}

std::vector<void*> BlocksOf(int64_t session) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<void*> out;
  for (const auto& [address, home] : g_homes) {
    if (home.session == session) out.push_back(reinterpret_cast<void*>(address));
  }
  return out;
}

void MarkDropped(const void* p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_homes.find(reinterpret_cast<uintptr_t>(p));
  if (it != g_homes.end()) it->second.dropped = true;
}

Home Of(const void* p) {
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_homes.find(reinterpret_cast<uintptr_t>(p));
  return it == g_homes.end() ? Home{} : it->second;
}

bool EnvAllocatorMade(int device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  return Known(device) && g_env_allocators[device]++ > 0;
}

void EnvAllocatorReleased(int device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (Known(device) && g_env_allocators[device] > 0) --g_env_allocators[device];
}

void RetireEnvBlocks(int device) {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (auto& [p, home] : g_homes) {
    if (home.device == device && home.session == 0) home.retired = true;
  }
}

OrtStatus* CheckCopy(const Backend& backend, const OrtValue* src, const void* src_data, bool src_on_device,
                     const OrtValue* dst, const void* dst_data, bool dst_on_device) {
  if (src_on_device) RETURN_IF_ERROR(CheckBlock(backend, src_data, LabelOf(src)));
  if (dst_on_device) RETURN_IF_ERROR(CheckBlock(backend, dst_data, LabelOf(dst)));
  return nullptr;
}

OrtStatus* CheckLaunch(const Backend& backend, int64_t session, int device, const std::vector<DeviceTensor>& inputs,
                       const std::vector<DeviceTensor>& outputs) {
  for (const auto* list : {&inputs, &outputs}) {
    for (const DeviceTensor& t : *list) RETURN_IF_ERROR(CheckBlock(backend, t.data, device));
  }
  if (!Enabled(Bug::kPerSessionPool)) return nullptr;
  // B15, after ROCm hip-ep#805 (a GPU tensor passed between two EP sessions gave "invalid
  // argument"): a session's allocator registers its blocks in that session's pool only, and a
  // launch accepts its own pool and the environment's.
  for (const DeviceTensor& t : inputs) {
    const Home home = Of(t.data);
    if (home.session != 0 && home.session != session) return ForeignPool(backend);
  }
  return nullptr;
}

}  // namespace devices
}  // namespace testbed
