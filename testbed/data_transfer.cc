#include "data_transfer.h"

#include <cstring>

#include "backends/backend.h"
#include "devices.h"
#include "factory.h"
#include "status.h"
#include "stream.h"
#include "stream_copy.h"
#include "trace.h"

namespace testbed {
namespace {

bool IsHost(const OrtMemoryDevice* device) {
  return EpApi().MemoryDevice_GetDeviceType(device) == OrtMemoryInfoDeviceType_CPU;
}

trace::Buffer Describe(const void* p, bool on_device) {
  return on_device ? trace::Buffer{OwnerOf(p), true} : trace::Buffer{"host", false};
}

}  // namespace

DataTransfer::DataTransfer(Mode mode, Backend* frozen, int64_t session)
    : OrtDataTransferImpl{}, mode_(mode), frozen_(frozen), session_(session) {
  ort_version_supported = ORT_API_VERSION;
  Release = ReleaseImpl;
  CanCopy = CanCopyImpl;
  CopyTensors = CopyTensorsImpl;
}

DataTransfer& DataTransfer::SharedLatchOnce() {
  static DataTransfer* shared = new DataTransfer(Mode::kLatchOnce, nullptr, 0);
  return *shared;
}

Backend* DataTransfer::Resolve() {
  switch (mode_) {
    case Mode::kFrozen:
      return frozen_;
    case Mode::kLazy:
      // Compare-and-recreate (#80): re-query the slot on each use, so neither the null nor a stale
      // backend can be latched. Backend copies keep no state, so "rebuilding" is re-pointing.
      return slot::Read().backend;
    case Mode::kLatchOnce: {
      // B1, pre-3fb9104: `if (backend_data_transfer_ == nullptr)` with no pointer comparison. The
      // first backend seen is kept forever, process-wide: a DirectML session in a process that
      // already used MIGraphX gets the HIP transfer (AIRADSW-750).
      Backend* latched = latched_.load();
      if (latched == nullptr) {
        Backend* current = slot::Read().backend;
        latched_.compare_exchange_strong(latched, current);
        latched = latched_.load();
      }
      return latched;
    }
  }
  return nullptr;
}

void ORT_API_CALL DataTransfer::ReleaseImpl(OrtDataTransferImpl* this_ptr) noexcept {
  auto* self = static_cast<DataTransfer*>(this_ptr);
  // ORT releases every instance it received (session end, then unregister); the shared B1
  // instance must survive any number of those calls.
  if (self->mode_ != Mode::kLatchOnce) delete self;
}

bool ORT_API_CALL DataTransfer::CanCopyImpl(const OrtDataTransferImpl* this_ptr, const OrtMemoryDevice* src,
                                            const OrtMemoryDevice* dst) noexcept {
  const auto* self = static_cast<const DataTransfer*>(this_ptr);
  // B2, 3fb9104: the registration-time instance froze a null backend, and a null backend's CanCopy
  // is false: every env-level copy fails with ORT's "not found" (the 10D / OGA failure).
  if (self->mode_ == Mode::kFrozen && self->frozen_ == nullptr) return false;
  const bool src_ours = IsTestbedMemory(src);
  const bool dst_ours = IsTestbedMemory(dst);
  return (src_ours || dst_ours) && (src_ours || IsHost(src)) && (dst_ours || IsHost(dst));
}

OrtStatus* ORT_API_CALL DataTransfer::CopyTensorsImpl(OrtDataTransferImpl* this_ptr, const OrtValue** src_tensors,
                                                      OrtValue** dst_tensors, OrtSyncStream** streams,
                                                      size_t num_tensors) noexcept {
  auto* self = static_cast<DataTransfer*>(this_ptr);
  TESTBED_API_BEGIN
  for (size_t i = 0; i < num_tensors; ++i) {
    RETURN_IF_ERROR(self->CopyOne(src_tensors[i], dst_tensors[i], streams != nullptr ? streams[i] : nullptr));
  }
  return nullptr;
  TESTBED_API_END
}

OrtStatus* DataTransfer::CopyOne(const OrtValue* src, OrtValue* dst, OrtSyncStream* stream) {
  Backend* backend = Resolve();
  RETURN_ERROR_IF(backend == nullptr,
                  "RacefuzzTestbed: no backend has been selected yet; create a session before copying device tensors.");
  const bool src_on_device = IsTestbedMemory(EpApi().Value_GetMemoryDevice(src));
  const bool dst_on_device = IsTestbedMemory(EpApi().Value_GetMemoryDevice(dst));
  size_t bytes = 0;
  const void* src_data = nullptr;
  void* dst_data = nullptr;
  RETURN_IF_ERROR(Api().GetTensorSizeInBytes(src, &bytes));
  RETURN_IF_ERROR(Api().GetTensorData(src, &src_data));
  RETURN_IF_ERROR(Api().GetTensorMutableData(dst, &dst_data));

  RETURN_IF_ERROR(devices::CheckCopy(*backend, src, src_data, src_on_device, dst, dst_data, dst_on_device));
  SessionStream* session_stream = StreamImpl::SessionStreamOf(stream);
  const bool queued_backend = std::strcmp(backend->name(), "mgx") == 0;  // dml copies at once
  const CopyRoute route = RouteUpdate(RouteCopy(stream, session_, src_on_device, dst_on_device), stream, session_,
                                      src_on_device, dst_on_device, dst_data, queued_backend);
  if (trace::On()) {
    const trace::Buffer from = Describe(src_data, src_on_device);
    const trace::Buffer to = Describe(dst_data, dst_on_device);
    const bool misroute = (from.device && from.owner != backend->name()) || (to.device && to.owner != backend->name());
    const int64_t session = session_ != 0 ? session_ : (session_stream != nullptr ? session_stream->session() : 0);
    trace::Copy(backend->name(), session, from, to, bytes, misroute);
  }
  if (route.barrier) DrainDeviceQueues();
  return backend->Copy(dst_data, dst_on_device, src_data, src_on_device, bytes, route.queue);
}

}  // namespace testbed
