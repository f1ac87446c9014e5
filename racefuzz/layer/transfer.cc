// The proxy OrtDataTransferImpl: checks every device value of a copy against the instance's
// owner (a session's EP, or the factory for the environment's), then forwards.
#include "holds.h"
#include "proxies.h"
#include "report.h"

namespace rflayer {

namespace {

ProxyDataTransfer* Self(const OrtDataTransferImpl* d) {
  return static_cast<ProxyDataTransfer*>(const_cast<OrtDataTransferImpl*>(d));
}

void ORT_API_CALL ReleaseImpl(OrtDataTransferImpl* d) noexcept {
  // ORT may hand an instance shared between calls back more than once: forwarded each time,
  // as the real library must cope with that itself.
  Self(d)->released = true;
  Ownership::Get().Forget(Self(d)->real);
  Self(d)->real->Release(Self(d)->real);
}

bool ORT_API_CALL CanCopyImpl(const OrtDataTransferImpl* d, const OrtMemoryDevice* src,
                              const OrtMemoryDevice* dst) noexcept {
  return Self(d)->real->CanCopy(Self(d)->real, src, dst);
}

OrtStatus* ORT_API_CALL CopyTensorsImpl(OrtDataTransferImpl* d, const OrtValue** src,
                                        OrtValue** dst, OrtSyncStream** streams,
                                        size_t n) noexcept {
  auto* p = Self(d);
  const bool factory_level = p->owner.ep == 0;
  for (size_t i = 0; i < n; i++) {
    CheckValue(src[i], p->owner, factory_level, "CopyTensors", "the source");
    CheckValue(dst[i], p->owner, factory_level, "CopyTensors", "the destination");
  }
  HoldAt(p->owner.session, Point::kCopy);
  return p->real->CopyTensors(p->real, src, dst, streams, n);
}

}  // namespace

ProxyDataTransfer::ProxyDataTransfer(OrtDataTransferImpl* real_transfer, Owner o)
    : OrtDataTransferImpl{}, real(real_transfer), owner(std::move(o)) {
  const uint32_t v = real->ort_version_supported;
  ort_version_supported = Declared(v);
  RF_WIRE(Release, ReleaseImpl, kV23);
  RF_WIRE(CanCopy, CanCopyImpl, kV23);
  RF_WIRE(CopyTensors, CopyTensorsImpl, kV23);
  Remember(this);
}

}  // namespace rflayer
