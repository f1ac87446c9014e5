// The proxy OrtSyncStreamImpl and OrtSyncNotificationImpl: forward, and say when a stream is
// used after its release.
#include "proxies.h"
#include "report.h"

namespace rflayer {

namespace {

ProxyStream* Self(OrtSyncStreamImpl* s) { return static_cast<ProxyStream*>(s); }
ProxyNotification* Note(OrtSyncNotificationImpl* n) { return static_cast<ProxyNotification*>(n); }

void Alive(ProxyStream* p, const char* call) {
  if (p->released.load())
    Report("use-after-release", call, "a stream of " + p->owner.Describe() + " used after its Release");
}

void ORT_API_CALL ReleaseImpl(OrtSyncStreamImpl* s) noexcept {
  auto* p = Self(s);
  if (p->released.exchange(true)) {
    Report("use-after-release", "Release", "a stream of " + p->owner.Describe() + " released twice");
    return;
  }
  p->real->Release(p->real);
}

void* ORT_API_CALL HandleImpl(OrtSyncStreamImpl* s) noexcept {
  Alive(Self(s), "GetHandle");
  return Self(s)->real->GetHandle(Self(s)->real);
}

OrtStatus* ORT_API_CALL NotificationImpl(OrtSyncStreamImpl* s,
                                         OrtSyncNotificationImpl** notification) noexcept {
  auto* p = Self(s);
  Alive(p, "CreateNotification");
  return Wrapped<ProxyNotification>(
      notification,
      [&](OrtSyncNotificationImpl** real) { return p->real->CreateNotification(p->real, real); },
      p);
}

OrtStatus* ORT_API_CALL FlushImpl(OrtSyncStreamImpl* s) noexcept {
  Alive(Self(s), "Flush");
  return Self(s)->real->Flush(Self(s)->real);
}

OrtStatus* ORT_API_CALL RunEndImpl(OrtSyncStreamImpl* s) noexcept {
  Alive(Self(s), "OnSessionRunEnd");
  return Self(s)->real->OnSessionRunEnd(Self(s)->real);
}

void ORT_API_CALL NoteReleaseImpl(OrtSyncNotificationImpl* n) noexcept {
  // ORT makes one per wait between streams and never touches it after its Release: the proxy
  // goes with it (unlike the others, which stay to report a use after release).
  ProxyNotification* p = Note(n);
  p->real->Release(p->real);
  delete p;
}

OrtStatus* ORT_API_CALL ActivateImpl(OrtSyncNotificationImpl* n) noexcept {
  return Note(n)->real->Activate(Note(n)->real);
}

OrtStatus* ORT_API_CALL WaitDeviceImpl(OrtSyncNotificationImpl* n, OrtSyncStream* consumer) noexcept {
  return Note(n)->real->WaitOnDevice(Note(n)->real, consumer);
}

OrtStatus* ORT_API_CALL WaitHostImpl(OrtSyncNotificationImpl* n) noexcept {
  return Note(n)->real->WaitOnHost(Note(n)->real);
}

}  // namespace

ProxyStream::ProxyStream(OrtSyncStreamImpl* real_stream, Owner o, std::string dev)
    : OrtSyncStreamImpl{}, real(real_stream), owner(std::move(o)), device(std::move(dev)) {
  const uint32_t v = real->ort_version_supported;
  ort_version_supported = Declared(v);
  RF_WIRE(Release, ReleaseImpl, kV23);
  RF_WIRE(GetHandle, HandleImpl, kV23);
  RF_WIRE(CreateNotification, NotificationImpl, kV23);
  RF_WIRE(Flush, FlushImpl, kV23);
  RF_WIRE(OnSessionRunEnd, RunEndImpl, kV23);
  Remember(this);
}

ProxyNotification::ProxyNotification(OrtSyncNotificationImpl* real_note, ProxyStream* s)
    : OrtSyncNotificationImpl{}, real(real_note), stream(s) {
  const uint32_t v = real->ort_version_supported;
  ort_version_supported = Declared(v);
  RF_WIRE(Release, NoteReleaseImpl, kV23);
  RF_WIRE(Activate, ActivateImpl, kV23);
  RF_WIRE(WaitOnDevice, WaitDeviceImpl, kV23);
  RF_WIRE(WaitOnHost, WaitHostImpl, kV23);
}

}  // namespace rflayer
