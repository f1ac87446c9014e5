// OrtDataTransferImpl: copies between host memory and the EP's device memory.
//
// ORT asks the factory for a DataTransfer at two times that need opposite behaviour (seed #80):
// once at library registration, before any CreateEp (instance #1, the only one env-level
// OrtApi::CopyTensors reaches), and once per session right after its CreateEp. The instance
// delegates every copy to a backend, chosen by its mode:
// - kFrozen: one backend fixed at construction (per-session instances in the fixed design; B2's
//   eager snapshot of the slot, which freezes null at registration);
// - kLazy: re-query the slot on each use and rebuild the backend transfer when it changed
//   (compare-and-recreate: the registration-time instance; every instance under B3);
// - kLatchOnce: B1, one instance shared by every caller that latches the first backend it sees.
// CanCopy looks only at device type and vendor id, as both seed backends do, so it cannot tell
// who owns a tensor.
#pragma once

#include <atomic>
#include <cstdint>

#include "onnxruntime_c_api.h"

namespace testbed {

class Backend;

class DataTransfer : public OrtDataTransferImpl {
 public:
  enum class Mode { kFrozen, kLazy, kLatchOnce };

  // `session` is 0 for the registration-time instance.
  DataTransfer(Mode mode, Backend* frozen, int64_t session);

  // B1's process-wide shared instance; ORT's Release calls on it are no-ops.
  static DataTransfer& SharedLatchOnce();

 private:
  // The backend to copy with now, or null when none has been selected yet.
  Backend* Resolve();

  static void ORT_API_CALL ReleaseImpl(OrtDataTransferImpl* this_ptr) noexcept;
  static bool ORT_API_CALL CanCopyImpl(const OrtDataTransferImpl* this_ptr, const OrtMemoryDevice* src_memory_device,
                                       const OrtMemoryDevice* dst_memory_device) noexcept;
  static OrtStatus* ORT_API_CALL CopyTensorsImpl(OrtDataTransferImpl* this_ptr, const OrtValue** src_tensors,
                                                 OrtValue** dst_tensors, OrtSyncStream** streams,
                                                 size_t num_tensors) noexcept;

  OrtStatus* CopyOne(const OrtValue* src, OrtValue* dst, OrtSyncStream* stream);

  const Mode mode_;
  Backend* const frozen_;
  const int64_t session_;
  std::atomic<Backend*> latched_{nullptr};  // kLatchOnce: the first backend seen
};

}  // namespace testbed
