// The proxy OrtEpFactory: forwards every call; wraps the EPs, allocators, data transfers and
// streams the real factory makes; and learns each EP's backend from its session's options.
#include <cctype>
#include <cstdio>
#include <string>
#include <vector>

#include "entry.h"
#include "proxies.h"
#include "report.h"

namespace rflayer {

namespace {

ProxyFactory* Self(const OrtEpFactory* f) {
  return static_cast<ProxyFactory*>(const_cast<OrtEpFactory*>(f));
}

const char* ORT_API_CALL GetNameImpl(const OrtEpFactory* f) noexcept {
  return Self(f)->real->GetName(Self(f)->real);
}

const char* ORT_API_CALL GetVendorImpl(const OrtEpFactory* f) noexcept {
  return Self(f)->real->GetVendor(Self(f)->real);
}

OrtStatus* ORT_API_CALL GetSupportedDevicesImpl(OrtEpFactory* f,
                                                const OrtHardwareDevice* const* devices,
                                                size_t num_devices, OrtEpDevice** ep_devices,
                                                size_t max_ep_devices,
                                                size_t* num_ep_devices) noexcept {
  // The real factory names itself in CreateEpDevice: the layer's EpApi maps it to this proxy.
  auto* p = Self(f);
  return p->real->GetSupportedDevices(p->real, devices, num_devices, ep_devices, max_ep_devices,
                                      num_ep_devices);
}

std::string HardwareKey(const OrtHardwareDevice* device) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "0x%04x:%u", g_api.ort->HardwareDevice_VendorId(device),
                g_api.ort->HardwareDevice_DeviceId(device));
  return buf;
}

// The backend an EP serves: the value of the provider option the target names, which ORT
// passes as session config `ep.<ep name lower-cased>.<key>`; else the EP's own name.
std::string BackendOf(ProxyFactory* p, const OrtSessionOptions* options) {
  std::string name = p->real->GetName(p->real);
  const std::string& key = p->reg->backend_option;
  if (key.empty() || options == nullptr) return name;
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::string entry = "ep." + lower + "." + key;
  int has = 0;
  if (g_api.ort->HasSessionConfigEntry(options, entry.c_str(), &has) != nullptr || !has)
    return name;
  char value[256] = {0};
  size_t size = sizeof value;
  OrtStatus* status = g_api.ort->GetSessionConfigEntry(options, entry.c_str(), value, &size);
  if (status != nullptr) {
    g_api.ort->ReleaseStatus(status);
    return name;
  }
  return key + "=" + value;
}

// The schedule's name for the session (`racefuzz.session`, set by racefuzz's worker): what a
// scheduling point is armed for. "" outside racefuzz.
std::string SessionTag(const OrtSessionOptions* options) {
  char value[128] = {0};
  size_t size = sizeof value;
  int has = 0;
  if (options == nullptr ||
      g_api.ort->HasSessionConfigEntry(options, "racefuzz.session", &has) != nullptr || !has)
    return "";
  OrtStatus* status = g_api.ort->GetSessionConfigEntry(options, "racefuzz.session", value, &size);
  if (status == nullptr) return value;
  g_api.ort->ReleaseStatus(status);
  return "";
}

OrtStatus* ORT_API_CALL CreateEpImpl(OrtEpFactory* f, const OrtHardwareDevice* const* devices,
                                     const OrtKeyValuePairs* const* ep_metadata_pairs,
                                     size_t num_devices, const OrtSessionOptions* session_options,
                                     const OrtLogger* logger, OrtEp** ep) noexcept {
  auto* p = Self(f);
  *ep = nullptr;
  OrtEp* real = nullptr;
  OrtStatus* status = p->real->CreateEp(p->real, devices, ep_metadata_pairs, num_devices,
                                        session_options, logger, &real);
  if (status != nullptr || real == nullptr) return status;
  std::string device = num_devices > 0 ? HardwareKey(devices[0]) : "none";
  std::string backend = BackendOf(p, session_options);
  Owner owner{Ownership::Get().Created(p->scope, backend), backend, SessionTag(session_options)};
  auto* proxy = new ProxyEp(real, p, owner, device);
  p->Made(proxy);
  SetJustCreated(proxy);
  *ep = proxy;
  return nullptr;
}

void ORT_API_CALL ReleaseEpImpl(OrtEpFactory* f, OrtEp* ep) noexcept {
  auto* p = Self(f);
  if (ep == nullptr || !IsProxy(ep)) {
    p->real->ReleaseEp(p->real, ep);
    return;
  }
  auto* proxy = static_cast<ProxyEp*>(ep);
  if (proxy->released.exchange(true)) {
    Report("use-after-release", "ReleaseEp",
           proxy->owner.Describe() + " released a second time");
    return;  // forwarding would free the real EP twice
  }
  Ownership::Get().Released(proxy->owner.ep);
  p->real->ReleaseEp(p->real, proxy->real);
}

uint32_t ORT_API_CALL GetVendorIdImpl(const OrtEpFactory* f) noexcept {
  return Self(f)->real->GetVendorId(Self(f)->real);
}

const char* ORT_API_CALL GetVersionImpl(const OrtEpFactory* f) noexcept {
  return Self(f)->real->GetVersion(Self(f)->real);
}

OrtStatus* ORT_API_CALL ValidateImpl(OrtEpFactory* f, const OrtHardwareDevice* const* devices,
                                     size_t num_devices, const char* info,
                                     OrtCompiledModelCompatibility* out) noexcept {
  auto* p = Self(f);
  return p->real->ValidateCompiledModelCompatibilityInfo(p->real, devices, num_devices, info, out);
}

OrtStatus* ORT_API_CALL CreateAllocatorImpl(OrtEpFactory* f, const OrtMemoryInfo* memory_info,
                                            const OrtKeyValuePairs* options,
                                            OrtAllocator** allocator) noexcept {
  auto* p = Self(f);
  return Wrapped<ProxyAllocator>(
      allocator,
      [&](OrtAllocator** real) {
        return p->real->CreateAllocator(p->real, memory_info, options, real);
      },
      Owner{}, p->scope);
}

void ORT_API_CALL ReleaseAllocatorImpl(OrtEpFactory* f, OrtAllocator* allocator) noexcept {
  auto* p = Self(f);
  OrtAllocator* real = allocator;
  if (allocator != nullptr && IsProxy(allocator)) real = static_cast<ProxyAllocator*>(allocator)->real;
  Ownership::Get().Forget(real);
  p->real->ReleaseAllocator(p->real, real);
}

OrtStatus* ORT_API_CALL CreateDataTransferImpl(OrtEpFactory* f,
                                               OrtDataTransferImpl** data_transfer) noexcept {
  auto* p = Self(f);
  *data_transfer = nullptr;
  // ORT asks for one at registration (the environment's) and one per session right after that
  // session's CreateEp, on the same thread: the EP just created there owns it.
  ProxyEp* session = TakeJustCreated();
  OrtDataTransferImpl* real = nullptr;
  OrtStatus* status = p->real->CreateDataTransfer(p->real, &real);
  if (status != nullptr || real == nullptr) return status;
  Owner owner = session != nullptr ? session->owner : Owner{};
  if (session != nullptr) {
    if (auto first = Ownership::Get().SharedWith(real, owner))
      Report("shared-object", "CreateDataTransfer",
             "the DataTransfer made for " + owner.Describe() + " is the one made for " +
                 first->Describe());
  }
  *data_transfer = new ProxyDataTransfer(real, owner);
  return nullptr;
}

bool ORT_API_CALL IsStreamAwareImpl(const OrtEpFactory* f) noexcept {
  return Self(f)->real->IsStreamAware(Self(f)->real);
}

OrtStatus* ORT_API_CALL CreateSyncStreamImpl(OrtEpFactory* f, const OrtMemoryDevice* device,
                                             const OrtKeyValuePairs* options,
                                             OrtSyncStreamImpl** stream) noexcept {
  auto* p = Self(f);
  return Wrapped<ProxyStream>(
      stream,
      [&](OrtSyncStreamImpl** real) {
        return p->real->CreateSyncStreamForDevice(p->real, device, options, real);
      },
      Owner{}, DeviceKey(device));
}

OrtStatus* ORT_API_CALL IncompatibilityImpl(OrtEpFactory* f, const OrtHardwareDevice* hw,
                                            OrtDeviceEpIncompatibilityDetails* details) noexcept {
  auto* p = Self(f);
  return p->real->GetHardwareDeviceIncompatibilityDetails(p->real, hw, details);
}

OrtStatus* ORT_API_CALL ImporterImpl(OrtEpFactory* f, const OrtEpDevice* ep_device,
                                     OrtExternalResourceImporterImpl** out) noexcept {
  auto* p = Self(f);
  return p->real->CreateExternalResourceImporterForDevice(p->real, ep_device, out);
}

OrtStatus* ORT_API_CALL NumDomainsImpl(OrtEpFactory* f, size_t* n) noexcept {
  return Self(f)->real->GetNumCustomOpDomains(Self(f)->real, n);
}

OrtStatus* ORT_API_CALL DomainsImpl(OrtEpFactory* f, OrtCustomOpDomain** domains,
                                    size_t n) noexcept {
  return Self(f)->real->GetCustomOpDomains(Self(f)->real, domains, n);
}

OrtStatus* ORT_API_CALL InitInteropImpl(OrtEpFactory* f, const OrtEpDevice* d,
                                        const OrtGraphicsInteropConfig* config) noexcept {
  return Self(f)->real->InitGraphicsInterop(Self(f)->real, d, config);
}

OrtStatus* ORT_API_CALL DeinitInteropImpl(OrtEpFactory* f, const OrtEpDevice* d) noexcept {
  return Self(f)->real->DeinitGraphicsInterop(Self(f)->real, d);
}

OrtStatus* ORT_API_CALL SelectImpl(OrtEpFactory* f, const OrtHardwareDevice* device,
                                   const OrtKeyValuePairs* const* candidates, size_t n,
                                   const OrtSessionOptions* options, size_t* selected) noexcept {
  auto* p = Self(f);
  return p->real->SelectBestModelCandidate(p->real, device, candidates, n, options, selected);
}

}  // namespace

void ProxyFactory::Made(ProxyEp* ep) {
  std::lock_guard<std::mutex> lock(mu);
  eps.push_back(ep);
}

std::vector<ProxyEp*> ProxyFactory::Alive() {
  std::lock_guard<std::mutex> lock(mu);
  std::vector<ProxyEp*> out;
  for (ProxyEp* ep : eps)
    if (!ep->released.load()) out.push_back(ep);
  return out;
}

ProxyFactory::ProxyFactory(OrtEpFactory* real_factory, Registration* registration)
    : OrtEpFactory{}, real(real_factory), reg(registration), scope(registration->library) {
  const uint32_t v = real->ort_version_supported;
  ort_version_supported = Declared(v);
  RF_WIRE(GetName, GetNameImpl, kV22);
  RF_WIRE(GetVendor, GetVendorImpl, kV22);
  RF_WIRE(GetSupportedDevices, GetSupportedDevicesImpl, kV22);
  RF_WIRE(CreateEp, CreateEpImpl, kV22);
  RF_WIRE(ReleaseEp, ReleaseEpImpl, kV22);
  RF_WIRE(GetVendorId, GetVendorIdImpl, kV23);
  RF_WIRE(GetVersion, GetVersionImpl, kV23);
  RF_WIRE(ValidateCompiledModelCompatibilityInfo, ValidateImpl, kV23);
  RF_WIRE(CreateAllocator, CreateAllocatorImpl, kV23);
  RF_WIRE(ReleaseAllocator, ReleaseAllocatorImpl, kV23);
  RF_WIRE(CreateDataTransfer, CreateDataTransferImpl, kV23);
  RF_WIRE(IsStreamAware, IsStreamAwareImpl, kV23);
  RF_WIRE(CreateSyncStreamForDevice, CreateSyncStreamImpl, kV23);
  RF_WIRE(GetHardwareDeviceIncompatibilityDetails, IncompatibilityImpl, kV24);
  RF_WIRE(CreateExternalResourceImporterForDevice, ImporterImpl, kV24);
  RF_WIRE(GetNumCustomOpDomains, NumDomainsImpl, kV24);
  RF_WIRE(GetCustomOpDomains, DomainsImpl, kV24);
  RF_WIRE(InitGraphicsInterop, InitInteropImpl, kV25);
  RF_WIRE(DeinitGraphicsInterop, DeinitInteropImpl, kV25);
  RF_WIRE(SelectBestModelCandidate, SelectImpl, kV28);
  Remember(this);
  MapFactory(real, this);
}

}  // namespace rflayer
