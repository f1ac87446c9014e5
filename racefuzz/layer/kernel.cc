// Kernels of a kernel-registry EP (webgpu's whole compute): the EP registers a create function
// per kernel; the layer registers its own in front of it, and wraps each OrtKernelImpl made so
// that its Compute's device inputs are checked against the EP whose session made it.
#include "kernel.h"

#include "holds.h"
#include "report.h"

namespace rflayer {

namespace {

struct ProxyKernel : OrtKernelImpl {
  OrtKernelImpl* real;
  Owner owner;
  ProxyKernel(OrtKernelImpl* real_kernel, Owner o);
};

ProxyKernel* Self(OrtKernelImpl* k) { return static_cast<ProxyKernel*>(k); }

OrtStatus* ORT_API_CALL ComputeImpl(OrtKernelImpl* k, OrtKernelContext* context) noexcept {
  auto* p = Self(k);
  CheckInputs(context, p->owner, "Compute");
  HoldAt(p->owner.session, Point::kCompute);
  OrtStatus* status = p->real->Compute(p->real, context);
  HoldAt(p->owner.session, Point::kComputeEnd);
  return status;
}

void ORT_API_CALL ReleaseImpl(OrtKernelImpl* k) noexcept {
  ProxyKernel* p = Self(k);  // ORT never touches a kernel after its Release
  p->real->Release(p->real);
  delete p;
}

OrtStatus* ORT_API_CALL PrePackImpl(OrtKernelImpl* k, const OrtValue* tensor, int input_index,
                                    OrtAllocator* allocator,
                                    OrtSharedPrePackedWeightCache* cache,
                                    bool* is_packed) noexcept {
  auto* p = Self(k);
  return p->real->PrePackWeight(p->real, tensor, input_index, allocator, cache, is_packed);
}

OrtStatus* ORT_API_CALL SharedPrePackImpl(OrtKernelImpl* k, const void* const* buffers,
                                          const size_t* sizes, size_t n,
                                          int input_index) noexcept {
  auto* p = Self(k);
  return p->real->SetSharedPrePackedWeight(p->real, buffers, sizes, n, input_index);
}

ProxyKernel::ProxyKernel(OrtKernelImpl* real_kernel, Owner o)
    : OrtKernelImpl{}, real(real_kernel), owner(std::move(o)) {
  const uint32_t v = real->ort_version_supported;
  ort_version_supported = Declared(v);
  RF_WIRE(Compute, ComputeImpl, kV24);
  RF_WIRE(Release, ReleaseImpl, kV24);
  RF_WIRE(PrePackWeight, PrePackImpl, kV24);
  RF_WIRE(SetSharedPrePackedWeight, SharedPrePackImpl, kV24);
}

// What the EP registered for one kernel: kept for the registry's life (never freed).
struct Registered {
  OrtKernelCreateFunc create;
  void* state;
};

OrtStatus* ORT_API_CALL CreateKernel(void* state, const OrtKernelInfo* info,
                                     OrtKernelImpl** out) noexcept {
  auto* reg = static_cast<Registered*>(state);
  OrtStatus* status = reg->create(reg->state, info, out);
  if (status != nullptr || *out == nullptr || (*out)->flags != 0)
    return status;  // ORT's own kernels (If, Loop, Scan) carry flags ORT reads: left as they are
  const OrtEp* ep = nullptr;
  OrtStatus* got = g_api.ep->KernelInfo_GetEp(info, &ep);  // ORT's table: the proxy it holds
  if (got != nullptr) {
    g_api.ort->ReleaseStatus(got);
    return nullptr;
  }
  if (ep != nullptr && IsProxy(ep)) *out = new ProxyKernel(*out, static_cast<const ProxyEp*>(ep)->owner);
  return nullptr;
}

}  // namespace

OrtStatus* ORT_API_CALL AddKernel(OrtKernelRegistry* registry, const OrtKernelDef* def,
                                  OrtKernelCreateFunc create, void* state) noexcept {
  if (create == nullptr) return g_api.ep->KernelRegistry_AddKernel(registry, def, create, state);
  return g_api.ep->KernelRegistry_AddKernel(registry, def, CreateKernel,
                                            new Registered{create, state});
}

}  // namespace rflayer
