// The proxy OrtNodeComputeInfo: checks each device input of a Compute against the EP that
// compiled the node, then forwards.
#include "kernel.h"
#include "holds.h"
#include "proxies.h"

namespace rflayer {

namespace {

ProxyComputeInfo* Self(OrtNodeComputeInfo* c) { return static_cast<ProxyComputeInfo*>(c); }

OrtStatus* ORT_API_CALL CreateStateImpl(OrtNodeComputeInfo* c, OrtNodeComputeContext* context,
                                        void** state) noexcept {
  return Self(c)->real->CreateState(Self(c)->real, context, state);
}

OrtStatus* ORT_API_CALL ComputeImpl(OrtNodeComputeInfo* c, void* state,
                                    OrtKernelContext* context) noexcept {
  auto* p = Self(c);
  CheckInputs(context, p->ep->owner, "Compute");
  HoldAt(p->ep->owner.session, Point::kCompute);
  OrtStatus* status = p->real->Compute(p->real, state, context);
  HoldAt(p->ep->owner.session, Point::kComputeEnd);
  return status;
}

void ORT_API_CALL ReleaseStateImpl(OrtNodeComputeInfo* c, void* state) noexcept {
  Self(c)->real->ReleaseState(Self(c)->real, state);
}

}  // namespace

void CheckInputs(OrtKernelContext* context, const Owner& owner, const char* call) {
  size_t inputs = 0;
  OrtStatus* status = g_api.ort->KernelContext_GetInputCount(context, &inputs);
  if (status != nullptr) {
    g_api.ort->ReleaseStatus(status);
    inputs = 0;
  }
  for (size_t i = 0; i < inputs; i++) {
    const OrtValue* value = nullptr;
    status = g_api.ort->KernelContext_GetInput(context, i, &value);
    if (status != nullptr) {
      g_api.ort->ReleaseStatus(status);
      continue;
    }
    CheckValue(value, owner, false, call, "an input");
  }
}

ProxyComputeInfo::ProxyComputeInfo(OrtNodeComputeInfo* real_info, ProxyEp* owner_ep)
    : OrtNodeComputeInfo{}, real(real_info), ep(owner_ep) {
  const uint32_t v = real->ort_version_supported;
  ort_version_supported = Declared(v);
  RF_WIRE(CreateState, CreateStateImpl, kV23);
  RF_WIRE(Compute, ComputeImpl, kV23);
  RF_WIRE(ReleaseState, ReleaseStateImpl, kV23);
  Remember(this);
}

}  // namespace rflayer
