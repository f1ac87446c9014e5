// The EP factory, and the process-wide routing state of the seed's ProviderFactory.
//
// One factory, one virtual GPU (AMD vendor id) created with OrtEpApi::CreateHardwareDevice, one
// memory device (GPU, 0x1002, id 0, DEFAULT) that both backends declare: as in the seed, nothing
// in ORT's view of a tensor says which backend owns it. The factory is reference counted: ORT's
// ReleaseEpFactory drops one reference and every EP, allocator and DataTransfer it handed out holds
// another, so sessions and device values that outlive an unregister keep working.
//
// The slot is the seed's ProviderFactory::backend_ep_factory_: written by every CreateEp, read by
// whatever resolves "the backend" lazily (the env allocator, the registration-time DataTransfer,
// and the buggy paths the switches restore).
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "onnxruntime_c_api.h"

namespace testbed {

class TestbedEp;

class Backend;

namespace slot {

// The slot's two fields: the backend that copies, and the one the factory allocator uses.
struct Fields {
  Backend* backend = nullptr;
  Backend* allocator_backend = nullptr;
};

// Every CreateEp publishes its backend here, in both fields. Atomic as a pair unless B8 tears it.
void Publish(Backend* backend);
// Both fields as the calling thread sees them now (one lock, so consistent unless B8 is on).
Fields Read();

}  // namespace slot

// What the calling thread's most recent CreateEp selected. ORT calls CreateEp and then, on the
// same thread, the session's CreateDataTransfer and allocator creation, so this binds those to
// their own session even when other threads construct sessions at the same time.
struct SessionBinding {
  uint64_t factory_generation = 0;
  int64_t session = 0;
  Backend* backend = nullptr;            // copies and compute
  Backend* allocator_backend = nullptr;  // allocations (differs only when B8 tore the slot)
};

// The binding of this thread's last CreateEp on the factory of `generation`, or null.
const SessionBinding* BindingOnThisThread(uint64_t generation);

// B5's per-thread session state: the backend a session selected, as seen from the calling thread
// (null on any thread but the one that ran its CreateEp).
Backend* SessionBackendOnThisThread(int64_t session);

inline constexpr uint32_t kVendorId = 0x1002;  // AMD, as in the seed

// True for the EP's memory devices: GPU, AMD, one of devices::kDeviceCount ids, DEFAULT memory.
// This is all that either backend's CanCopy can check: both backends share each of them.
bool IsTestbedMemory(const OrtMemoryDevice* device);

// Keeps the library mapped for the rest of the process (device values and sessions may outlive
// an unregister, and MIGraphX worker threads run our code).
void PinThisLibrary();

class TestbedFactory : public OrtEpFactory {
 public:
  // Null with `*status` set when the memory info cannot be created.
  static TestbedFactory* Create(const OrtLogger* default_logger, OrtStatus** status);

  void Ref() { refs_.fetch_add(1); }
  void Unref();

  // The memory info of device `device` (0 .. devices::kDeviceCount - 1).
  const OrtMemoryInfo* memory_info(int device = 0) const { return memory_infos_[device]; }
  uint64_t generation() const { return generation_; }
  void LogError(const std::string& message) const;

 private:
  explicit TestbedFactory(const OrtLogger* default_logger);
  ~TestbedFactory();

  static const char* ORT_API_CALL GetNameImpl(const OrtEpFactory* this_ptr) noexcept;
  static const char* ORT_API_CALL GetVendorImpl(const OrtEpFactory* this_ptr) noexcept;
  static uint32_t ORT_API_CALL GetVendorIdImpl(const OrtEpFactory* this_ptr) noexcept;
  static const char* ORT_API_CALL GetVersionImpl(const OrtEpFactory* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL GetSupportedDevicesImpl(OrtEpFactory* this_ptr,
                                                         const OrtHardwareDevice* const* devices, size_t num_devices,
                                                         OrtEpDevice** ep_devices, size_t max_ep_devices,
                                                         size_t* num_ep_devices) noexcept;
  static OrtStatus* ORT_API_CALL CreateEpImpl(OrtEpFactory* this_ptr, const OrtHardwareDevice* const* devices,
                                              const OrtKeyValuePairs* const* ep_metadata, size_t num_devices,
                                              const OrtSessionOptions* session_options, const OrtLogger* logger,
                                              OrtEp** ep) noexcept;
  static void ORT_API_CALL ReleaseEpImpl(OrtEpFactory* this_ptr, OrtEp* ep) noexcept;
  static OrtStatus* ORT_API_CALL CreateAllocatorImpl(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                                     const OrtKeyValuePairs* allocator_options,
                                                     OrtAllocator** allocator) noexcept;
  static void ORT_API_CALL ReleaseAllocatorImpl(OrtEpFactory* this_ptr, OrtAllocator* allocator) noexcept;
  static OrtStatus* ORT_API_CALL CreateDataTransferImpl(OrtEpFactory* this_ptr,
                                                        OrtDataTransferImpl** data_transfer) noexcept;
  static bool ORT_API_CALL IsStreamAwareImpl(const OrtEpFactory* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL CreateSyncStreamForDeviceImpl(OrtEpFactory* this_ptr,
                                                               const OrtMemoryDevice* memory_device,
                                                               const OrtKeyValuePairs* stream_options,
                                                               OrtSyncStreamImpl** stream) noexcept;

  OrtStatus* NewEp(const OrtSessionOptions* session_options, int device, OrtEp** ep);
  // The live sessions, for diagnostics: Track returns how many already share `ep`'s backend.
  size_t Track(const TestbedEp* ep);
  void Forget(const TestbedEp* ep);

  const OrtLogger* logger_;
  const uint64_t generation_;
  std::atomic<int> refs_{1};
  std::vector<OrtMemoryInfo*> memory_infos_;  // one per device
  std::mutex device_mutex_;
  std::vector<OrtHardwareDevice*> hardware_devices_;  // created once, in GetSupportedDevices
  std::mutex sessions_mutex_;
  std::vector<const TestbedEp*> sessions_;  // every OrtEp handed to ORT and not yet released
};

}  // namespace testbed
