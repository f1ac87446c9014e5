// The proxy OrtEp: forwards every call; wraps the node compute infos, allocators and streams
// the real EP makes, each owned by this EP instance.
#include "holds.h"
#include "proxies.h"
#include "report.h"

namespace rflayer {

namespace {

ProxyEp* Self(const OrtEp* e) { return static_cast<ProxyEp*>(const_cast<OrtEp*>(e)); }

// A call into an EP after its ReleaseEp: said once per call name, then forwarded anyway (the
// real EP may still be alive; what happens next is the EP's behaviour, not the layer's).
void Alive(ProxyEp* p, const char* call) {
  if (p->released.load()) Report("use-after-release", call, p->owner.Describe() + " called after ReleaseEp");
}

const char* ORT_API_CALL GetNameImpl(const OrtEp* e) noexcept {
  return Self(e)->real->GetName(Self(e)->real);
}

OrtStatus* ORT_API_CALL GetCapabilityImpl(OrtEp* e, const OrtGraph* graph,
                                          OrtEpGraphSupportInfo* info) noexcept {
  return Self(e)->real->GetCapability(Self(e)->real, graph, info);
}

OrtStatus* ORT_API_CALL CompileImpl(OrtEp* e, const OrtGraph** graphs, const OrtNode** fused,
                                    size_t count, OrtNodeComputeInfo** infos,
                                    OrtNode** ep_context_nodes) noexcept {
  auto* p = Self(e);
  for (size_t i = 0; i < count; i++) infos[i] = nullptr;
  OrtStatus* status = p->real->Compile(p->real, graphs, fused, count, infos, ep_context_nodes);
  if (status != nullptr) return status;
  for (size_t i = 0; i < count; i++)
    if (infos[i] != nullptr) infos[i] = new ProxyComputeInfo(infos[i], p);
  return nullptr;
}

void ORT_API_CALL ReleaseInfosImpl(OrtEp* e, OrtNodeComputeInfo** infos, size_t n) noexcept {
  auto* p = Self(e);
  for (size_t i = 0; i < n; i++)
    if (infos[i] != nullptr && IsProxy(infos[i])) infos[i] = static_cast<ProxyComputeInfo*>(infos[i])->real;
  p->real->ReleaseNodeComputeInfos(p->real, infos, n);
}

OrtStatus* ORT_API_CALL LayoutImpl(OrtEp* e, OrtEpDataLayout* layout) noexcept {
  return Self(e)->real->GetPreferredDataLayout(Self(e)->real, layout);
}

OrtStatus* ORT_API_CALL ConvertImpl(OrtEp* e, const char* domain, const char* op,
                                    OrtEpDataLayout target, int* convert) noexcept {
  return Self(e)->real->ShouldConvertDataLayoutForOp(Self(e)->real, domain, op, target, convert);
}

OrtStatus* ORT_API_CALL DynamicImpl(OrtEp* e, const char* const* keys, const char* const* values,
                                    size_t n) noexcept {
  return Self(e)->real->SetDynamicOptions(Self(e)->real, keys, values, n);
}

OrtStatus* ORT_API_CALL RunStartImpl(OrtEp* e, const OrtRunOptions* options) noexcept {
  Alive(Self(e), "OnRunStart");
  OrtStatus* status = Self(e)->real->OnRunStart(Self(e)->real, options);
  HoldAt(Self(e)->owner.session, Point::kRunStart);  // "between OnRunStart and Compute"
  return status;
}

OrtStatus* ORT_API_CALL RunEndImpl(OrtEp* e, const OrtRunOptions* options, bool sync) noexcept {
  Alive(Self(e), "OnRunEnd");
  HoldAt(Self(e)->owner.session, Point::kRunEnd);
  return Self(e)->real->OnRunEnd(Self(e)->real, options, sync);
}

OrtStatus* ORT_API_CALL CreateAllocatorImpl(OrtEp* e, const OrtMemoryInfo* memory_info,
                                            OrtAllocator** allocator) noexcept {
  auto* p = Self(e);
  OrtStatus* status = Wrapped<ProxyAllocator>(
      allocator,
      [&](OrtAllocator** real) { return p->real->CreateAllocator(p->real, memory_info, real); },
      p->owner, p->factory->scope);
  if (*allocator == nullptr) return status;
  OrtAllocator* real = static_cast<ProxyAllocator*>(*allocator)->real;
  if (auto first = Ownership::Get().SharedWith(real, p->owner))
    Report("shared-object", "CreateAllocator",
           "the allocator made for " + p->owner.Describe() + " is the one made for " +
               first->Describe());
  return status;
}

OrtStatus* ORT_API_CALL CreateStreamImpl(OrtEp* e, const OrtMemoryDevice* device,
                                         OrtSyncStreamImpl** stream) noexcept {
  auto* p = Self(e);
  return Wrapped<ProxyStream>(
      stream,
      [&](OrtSyncStreamImpl** real) {
        return p->real->CreateSyncStreamForDevice(p->real, device, real);
      },
      p->owner, DeviceKey(device));
}

const char* ORT_API_CALL CompatImpl(OrtEp* e, const OrtGraph* graph) noexcept {
  return Self(e)->real->GetCompiledModelCompatibilityInfo(Self(e)->real, graph);
}

OrtStatus* ORT_API_CALL KernelsImpl(OrtEp* e, const OrtKernelRegistry** registry) noexcept {
  return Self(e)->real->GetKernelRegistry(Self(e)->real, registry);
}

OrtStatus* ORT_API_CALL ConcurrentImpl(OrtEp* e, bool* supported) noexcept {
  return Self(e)->real->IsConcurrentRunSupported(Self(e)->real, supported);
}

OrtStatus* ORT_API_CALL SyncImpl(OrtEp* e) noexcept {
  Alive(Self(e), "Sync");
  return Self(e)->real->Sync(Self(e)->real);
}

OrtStatus* ORT_API_CALL ProfilerImpl(OrtEp* e, OrtEpProfilerImpl** profiler) noexcept {
  return Self(e)->real->CreateProfiler(Self(e)->real, profiler);
}

bool ORT_API_CALL CaptureEnabledImpl(const OrtEp* e) noexcept {
  return Self(e)->real->IsGraphCaptureEnabled(Self(e)->real);
}

bool ORT_API_CALL CapturedImpl(const OrtEp* e, int id) noexcept {
  return Self(e)->real->IsGraphCaptured(Self(e)->real, id);
}

OrtStatus* ORT_API_CALL ReplayImpl(OrtEp* e, int id) noexcept {
  return Self(e)->real->ReplayGraph(Self(e)->real, id);
}

OrtGraphCaptureNodeAssignmentPolicy ORT_API_CALL PolicyImpl(const OrtEp* e) noexcept {
  return Self(e)->real->GetGraphCaptureNodeAssignmentPolicy(Self(e)->real);
}

OrtStatus* ORT_API_CALL ResourceImpl(const OrtEp* e, OrtResourceCount* available) noexcept {
  return Self(e)->real->GetAvailableResource(Self(e)->real, available);
}

OrtStatus* ORT_API_CALL InitEndImpl(OrtEp* e) noexcept {
  return Self(e)->real->OnSessionInitializationEnd(Self(e)->real);
}

OrtStatus* ORT_API_CALL DefaultDeviceImpl(const OrtEp* e, const OrtMemoryDevice** device) noexcept {
  return Self(e)->real->GetDefaultMemoryDevice(Self(e)->real, device);
}

OrtStatus* ORT_API_CALL ReleaseCapturedImpl(OrtEp* e, int id) noexcept {
  return Self(e)->real->ReleaseCapturedGraph(Self(e)->real, id);
}

OrtStatus* ORT_API_CALL WeightlessImpl(const OrtEp* e, OrtWeightlessSupport* support) noexcept {
  return Self(e)->real->GetWeightlessSupport(Self(e)->real, support);
}

}  // namespace

ProxyEp::ProxyEp(OrtEp* real_ep, ProxyFactory* f, Owner o, std::string dev)
    : OrtEp{}, real(real_ep), factory(f), owner(std::move(o)), device(std::move(dev)) {
  const uint32_t v = real->ort_version_supported;
  ort_version_supported = Declared(v);
  RF_WIRE(GetName, GetNameImpl, kV22);
  RF_WIRE(GetCapability, GetCapabilityImpl, kV23);
  RF_WIRE(Compile, CompileImpl, kV23);
  RF_WIRE(ReleaseNodeComputeInfos, ReleaseInfosImpl, kV23);
  RF_WIRE(GetPreferredDataLayout, LayoutImpl, kV23);
  RF_WIRE(ShouldConvertDataLayoutForOp, ConvertImpl, kV23);
  RF_WIRE(SetDynamicOptions, DynamicImpl, kV23);
  RF_WIRE(OnRunStart, RunStartImpl, kV23);
  RF_WIRE(OnRunEnd, RunEndImpl, kV23);
  RF_WIRE(CreateAllocator, CreateAllocatorImpl, kV23);
  RF_WIRE(CreateSyncStreamForDevice, CreateStreamImpl, kV23);
  RF_WIRE(GetCompiledModelCompatibilityInfo, CompatImpl, kV23);
  RF_WIRE(GetKernelRegistry, KernelsImpl, kV24);
  RF_WIRE(IsConcurrentRunSupported, ConcurrentImpl, kV24);
  RF_WIRE(Sync, SyncImpl, kV25);
  RF_WIRE(CreateProfiler, ProfilerImpl, kV25);
  RF_WIRE(IsGraphCaptureEnabled, CaptureEnabledImpl, kV26);
  RF_WIRE(IsGraphCaptured, CapturedImpl, kV26);
  RF_WIRE(ReplayGraph, ReplayImpl, kV26);
  RF_WIRE(GetGraphCaptureNodeAssignmentPolicy, PolicyImpl, kV26);
  RF_WIRE(GetAvailableResource, ResourceImpl, kV26);
  RF_WIRE(OnSessionInitializationEnd, InitEndImpl, kV27);
  RF_WIRE(GetDefaultMemoryDevice, DefaultDeviceImpl, kV27);
  RF_WIRE(ReleaseCapturedGraph, ReleaseCapturedImpl, kV27);
  RF_WIRE(GetWeightlessSupport, WeightlessImpl, kV29);
  Remember(this);
}

}  // namespace rflayer
