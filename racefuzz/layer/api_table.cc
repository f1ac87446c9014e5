// The OrtApi and OrtEpApi the real library gets: ORT's own tables, copied, with the few entries
// through which ORT hands the EP back an object the layer proxied (a factory it names in
// CreateEpDevice, the OrtEp of a kernel, the impl of a stream) mapped to the real object.
#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "entry.h"
#include "kernel.h"
#include "proxies.h"

namespace rflayer {

namespace {

constexpr size_t kMaxEntries = 4096;

struct Tables {
  std::mutex mu;
  const OrtApiBase* ort_base = nullptr;
  const OrtApi* ort = nullptr;
  const OrtEpApi* ep = nullptr;
  void* api[kMaxEntries] = {};
  void* ep_api[kMaxEntries] = {};
  OrtApiBase base{};
};

Tables& T() {
  static auto* t = new Tables();
  return *t;
}

// ORT only appends to its tables, and one table serves every version: copy entries while they
// are functions of ORT's own library, so a table newer than these headers is copied whole.
void CopyTable(const void* table, void** out) {
  auto* const* entries = static_cast<void* const*>(table);
  Dl_info first{}, info{};
  std::memset(out, 0, kMaxEntries * sizeof(void*));
  if (dladdr(entries[0], &first) == 0) return;
  for (size_t n = 0; n < kMaxEntries && entries[n] != nullptr; n++) {
    if (dladdr(entries[n], &info) == 0 || info.dli_fbase != first.dli_fbase) break;
    out[n] = entries[n];
  }
}

OrtStatus* ORT_API_CALL CreateEpDeviceImpl(OrtEpFactory* factory, const OrtHardwareDevice* hw,
                                           const OrtKeyValuePairs* metadata,
                                           const OrtKeyValuePairs* options,
                                           OrtEpDevice** out) noexcept {
  return T().ep->CreateEpDevice(ProxyOf(factory), hw, metadata, options, out);
}

OrtStatus* ORT_API_CALL KernelInfoGetEpImpl(const OrtKernelInfo* info, const OrtEp** ep) noexcept {
  OrtStatus* status = T().ep->KernelInfo_GetEp(info, ep);
  if (status == nullptr && ep != nullptr) *ep = RealEp(*ep);
  return status;
}

const OrtSyncStreamImpl* ORT_API_CALL SyncStreamGetImplImpl(const OrtSyncStream* stream) noexcept {
  return RealStream(T().ep->SyncStream_GetImpl(stream));
}

const OrtEpApi* ORT_API_CALL GetEpApiImpl() noexcept {
  return reinterpret_cast<const OrtEpApi*>(T().ep_api);
}

const OrtApi* ORT_API_CALL GetApiImpl(uint32_t version) noexcept {
  Tables& t = T();
  const OrtApi* api = t.ort_base->GetApi(version);
  if (api == nullptr) return nullptr;
  std::lock_guard<std::mutex> lock(t.mu);
  if (t.ort != api) {
    CopyTable(api, t.api);
    t.ort = api;
    t.ep = api->GetEpApi();
    CopyTable(t.ep, t.ep_api);
    auto* ep_copy = reinterpret_cast<OrtEpApi*>(t.ep_api);
    ep_copy->CreateEpDevice = CreateEpDeviceImpl;
    ep_copy->KernelInfo_GetEp = KernelInfoGetEpImpl;
    ep_copy->SyncStream_GetImpl = SyncStreamGetImplImpl;
    ep_copy->KernelRegistry_AddKernel = AddKernel;  // each kernel made is wrapped (kernel.cc)
    reinterpret_cast<OrtApi*>(t.api)->GetEpApi = GetEpApiImpl;
  }
  return reinterpret_cast<const OrtApi*>(t.api);
}

}  // namespace

const OrtApiBase* LayerApiBase(const OrtApiBase* ort_base) {
  Tables& t = T();
  std::lock_guard<std::mutex> lock(t.mu);
  t.ort_base = ort_base;
  t.base.GetApi = GetApiImpl;
  t.base.GetVersionString = ort_base->GetVersionString;
  return &t.base;
}

}  // namespace rflayer
