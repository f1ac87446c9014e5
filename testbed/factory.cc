#include "factory.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "allocator.h"
#include "backends/backend.h"
#include "bugs.h"
#include "data_transfer.h"
#include "devices.h"
#include "ep.h"
#include "shared_checks.h"
#include "status.h"
#include "stream.h"

#if defined(_WIN32)
#include <windows.h>
#else
#include <dlfcn.h>
#endif

namespace testbed {

// ---- The slot: ProviderFactory::backend_ep_factory_ ----------------------------------------
namespace slot {
namespace {

// B8 widens the window between the two plain stores so that two sessions constructed at once
// on two threads interleave inside it within a few tries, even when a busy machine delays one
// thread by a scheduler slice or more (5 ms once gave 0 hits in 20 replays under CI load).
constexpr std::chrono::milliseconds kTornWriteWindow{30};

struct AtomicFields {
  std::atomic<Backend*> backend{nullptr};
  std::atomic<Backend*> allocator_backend{nullptr};
};

AtomicFields g_fields;
thread_local AtomicFields t_fields;
std::mutex g_mutex;

// B5, the rejected per-thread design: each thread has its own slot.
AtomicFields& Current() { return Enabled(Bug::kThreadLocalSlot) ? t_fields : g_fields; }

}  // namespace

void Publish(Backend* backend) {
  AtomicFields& fields = Current();
  if (Enabled(Bug::kTornSlotWrite)) {
    // B8: two fields written one after the other, no lock. A CreateEp on another thread that
    // lands between them leaves a backend of one session next to the allocator of the other.
    fields.backend.store(backend);
    std::this_thread::sleep_for(kTornWriteWindow);
    fields.allocator_backend.store(backend);
    return;
  }
  std::lock_guard<std::mutex> lock(g_mutex);
  fields.backend.store(backend);
  fields.allocator_backend.store(backend);
}

Fields Read() {
  AtomicFields& fields = Current();
  if (Enabled(Bug::kTornSlotWrite)) return Fields{fields.backend.load(), fields.allocator_backend.load()};
  std::lock_guard<std::mutex> lock(g_mutex);
  return Fields{fields.backend.load(), fields.allocator_backend.load()};
}

}  // namespace slot

// ---- Per-thread state --------------------------------------------------------------------------
namespace {

thread_local SessionBinding t_binding;
thread_local std::unordered_map<int64_t, Backend*> t_session_backends;  // B5 only
std::atomic<int64_t> g_last_session{0};    // session ids: 1, 2, 3... in CreateEp order, per process
std::atomic<uint64_t> g_last_generation{0};

// B18: the compiled programs every session of the process shares, counted by session.
struct SharedPrograms {
  std::atomic<int> sessions{0};
};
std::atomic<SharedPrograms*> g_programs{nullptr};
std::atomic<bool> g_programs_built{false};
std::mutex g_programs_mutex;

// B18 (not a seed behaviour): the shared programs are built by the first CreateEp and freed by the
// ReleaseEp of the last session, but the "built" flag stays set, so the next CreateEp uses the
// freed object. The pointer is nulled, so what would be a use-after-free is a certain SIGSEGV.
void ProgramsUsed() {
  std::lock_guard<std::mutex> lock(g_programs_mutex);
  if (!g_programs_built.exchange(true)) g_programs.store(new SharedPrograms);
  g_programs.load()->sessions.fetch_add(1);  // null after the last release: SIGSEGV
}

void ProgramsDropped() {
  std::lock_guard<std::mutex> lock(g_programs_mutex);
  SharedPrograms* programs = g_programs.load();
  if (programs != nullptr && programs->sessions.fetch_sub(1) == 1) {
    g_programs.store(nullptr);
    delete programs;
  }
}

// RACEFUZZ_TESTBED_HARDWARE=npu (read once) reports the virtual devices as NPUs while their memory
// stays GPU memory: an EP whose tensors live on a device of another type than its hardware device,
// so outputs must be bound by the memory's device, never the hardware's. Not a bug switch.
OrtHardwareDeviceType HardwareType() {
  static const OrtHardwareDeviceType type = [] {
    const char* raw = std::getenv("RACEFUZZ_TESTBED_HARDWARE");
    return raw != nullptr && std::string(raw) == "npu" ? OrtHardwareDeviceType_NPU : OrtHardwareDeviceType_GPU;
  }();
  return type;
}

}  // namespace

const SessionBinding* BindingOnThisThread(uint64_t generation) {
  return t_binding.factory_generation == generation ? &t_binding : nullptr;
}

Backend* SessionBackendOnThisThread(int64_t session) {
  auto it = t_session_backends.find(session);
  return it == t_session_backends.end() ? nullptr : it->second;
}

bool IsTestbedMemory(const OrtMemoryDevice* device) {
  return device != nullptr && EpApi().MemoryDevice_GetDeviceType(device) == OrtMemoryInfoDeviceType_GPU &&
         EpApi().MemoryDevice_GetVendorId(device) == kVendorId &&
         EpApi().MemoryDevice_GetDeviceId(device) < static_cast<uint32_t>(devices::kDeviceCount) &&
         EpApi().MemoryDevice_GetMemoryType(device) == OrtDeviceMemoryType_DEFAULT;
}

void PinThisLibrary() {
#if defined(_WIN32)
  HMODULE module = nullptr;
  GetModuleHandleExW(GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
                     reinterpret_cast<LPCWSTR>(&PinThisLibrary), &module);
#else
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&PinThisLibrary), &info) != 0 && info.dli_fname != nullptr) {
    // The extra reference is never dropped, and RTLD_NODELETE makes dlclose a no-op anyway.
    dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
  }
#endif
}

// ---- The factory -------------------------------------------------------------------------------

TestbedFactory* TestbedFactory::Create(const OrtLogger* default_logger, OrtStatus** status) {
  auto* factory = new TestbedFactory(default_logger);
  *status = nullptr;
  for (int device = 0; device < devices::kDeviceCount && *status == nullptr; ++device) {
    OrtMemoryInfo* info = nullptr;
    *status = Api().CreateMemoryInfo_V2("RacefuzzTestbed GPU", OrtMemoryInfoDeviceType_GPU, kVendorId, device,
                                        OrtDeviceMemoryType_DEFAULT, 0, OrtDeviceAllocator, &info);
    if (info != nullptr) factory->memory_infos_.push_back(info);
  }
  if (*status != nullptr) {
    factory->Unref();
    return nullptr;
  }
  return factory;
}

TestbedFactory::TestbedFactory(const OrtLogger* default_logger)
    : OrtEpFactory{}, logger_(default_logger), generation_(++g_last_generation) {
  ort_version_supported = ORT_API_VERSION;
  GetName = GetNameImpl;
  GetVendor = GetVendorImpl;
  GetVendorId = GetVendorIdImpl;
  GetVersion = GetVersionImpl;
  GetSupportedDevices = GetSupportedDevicesImpl;
  CreateEp = CreateEpImpl;
  ReleaseEp = ReleaseEpImpl;
  CreateAllocator = CreateAllocatorImpl;
  ReleaseAllocator = ReleaseAllocatorImpl;
  CreateDataTransfer = CreateDataTransferImpl;
  IsStreamAware = IsStreamAwareImpl;
  CreateSyncStreamForDevice = CreateSyncStreamForDeviceImpl;
}

TestbedFactory::~TestbedFactory() {
  for (OrtHardwareDevice* device : hardware_devices_) EpApi().ReleaseHardwareDevice(device);
  for (OrtMemoryInfo* info : memory_infos_) Api().ReleaseMemoryInfo(info);
}

void TestbedFactory::Unref() {
  if (refs_.fetch_sub(1) == 1) delete this;
}

void TestbedFactory::LogError(const std::string& message) const {
  if (logger_ == nullptr) return;
  TakeMessage(Api().Logger_LogMessage(logger_, ORT_LOGGING_LEVEL_ERROR, message.c_str(), ORT_FILE,
                                      __LINE__, __func__));
}

const char* ORT_API_CALL TestbedFactory::GetNameImpl(const OrtEpFactory* /*this_ptr*/) noexcept { return kEpName; }

const char* ORT_API_CALL TestbedFactory::GetVendorImpl(const OrtEpFactory* /*this_ptr*/) noexcept {
  return "racefuzz";
}

uint32_t ORT_API_CALL TestbedFactory::GetVendorIdImpl(const OrtEpFactory* /*this_ptr*/) noexcept { return kVendorId; }

const char* ORT_API_CALL TestbedFactory::GetVersionImpl(const OrtEpFactory* /*this_ptr*/) noexcept { return "0.1.0"; }

OrtStatus* ORT_API_CALL TestbedFactory::GetSupportedDevicesImpl(OrtEpFactory* this_ptr,
                                                                const OrtHardwareDevice* const* /*devices*/,
                                                                size_t /*num_devices*/, OrtEpDevice** ep_devices,
                                                                size_t max_ep_devices,
                                                                size_t* num_ep_devices) noexcept {
  auto* self = static_cast<TestbedFactory*>(this_ptr);
  *num_ep_devices = 0;
  TESTBED_API_BEGIN
  std::lock_guard<std::mutex> lock(self->device_mutex_);
  // Virtual GPUs of our own, so the EP runs on machines without one; created once.
  while (self->hardware_devices_.size() < static_cast<size_t>(devices::kDeviceCount)) {
    OrtHardwareDevice* device = nullptr;
    RETURN_IF_ERROR(EpApi().CreateHardwareDevice(HardwareType(), kVendorId,
                                                 static_cast<uint32_t>(self->hardware_devices_.size()), "racefuzz",
                                                 nullptr, &device));
    self->hardware_devices_.push_back(device);
  }
  for (size_t k = 0; k < self->hardware_devices_.size() && k < max_ep_devices; ++k) {
    OrtEpDevice* ep_device = nullptr;
    RETURN_IF_ERROR(EpApi().CreateEpDevice(self, self->hardware_devices_[k], nullptr, nullptr, &ep_device));
    OrtStatus* status = EpApi().EpDevice_AddAllocatorInfo(ep_device, self->memory_infos_[k]);
    if (status != nullptr) {
      EpApi().ReleaseEpDevice(ep_device);
      return status;
    }
    ep_devices[k] = ep_device;
    *num_ep_devices = k + 1;
  }
  return nullptr;
  TESTBED_API_END
}

OrtStatus* ORT_API_CALL TestbedFactory::CreateEpImpl(OrtEpFactory* this_ptr,
                                                     const OrtHardwareDevice* const* devices,
                                                     const OrtKeyValuePairs* const* /*ep_metadata*/,
                                                     size_t num_devices, const OrtSessionOptions* session_options,
                                                     const OrtLogger* /*logger*/, OrtEp** ep) noexcept {
  *ep = nullptr;
  TESTBED_API_BEGIN
  // A session given several of our devices runs on the first, as ORT's own GPU EPs do.
  const int device = num_devices > 0 ? static_cast<int>(Api().HardwareDevice_DeviceId(devices[0])) : 0;
  return static_cast<TestbedFactory*>(this_ptr)->NewEp(session_options, device, ep);
  TESTBED_API_END
}

constexpr int kEpSlots = 32;  // B24's table

OrtStatus* TestbedFactory::NewEp(const OrtSessionOptions* session_options, int device, OrtEp** ep) {
  // Provider options reach us as session config entries named ep.<lower-cased ep name>.<key>.
  constexpr const char* kKey = "ep.racefuzztestbed.profile";
  int has_profile = 0;
  RETURN_IF_ERROR(Api().HasSessionConfigEntry(session_options, kKey, &has_profile));
  RETURN_ERROR_IF(!has_profile, "RacefuzzTestbed needs the provider option 'profile' ('dml' or 'mgx').");
  size_t size = 0;
  RETURN_IF_ERROR(Api().GetSessionConfigEntry(session_options, kKey, nullptr, &size));
  std::vector<char> value(size + 1, '\0');
  RETURN_IF_ERROR(Api().GetSessionConfigEntry(session_options, kKey, value.data(), &size));
  const std::string profile = value.data();
  Backend* selected = BackendForProfile(profile);
  RETURN_ERROR_IF(selected == nullptr,
                  "RacefuzzTestbed: unknown profile '" + profile + "'; expected 'dml' or 'mgx'.");

  if (Enabled(Bug::kEpSlotsNeverReturned)) {
    // B24: a per-process table of EP contexts, as a driver's handle pool, whose slots ReleaseEp
    // forgets to return. No one schedule makes 32 sessions; a process that serves many does.
    static std::atomic<int> taken{0};
    RETURN_ERROR_IF(++taken > kEpSlots, "RacefuzzTestbed: no free EP context (all " +
                                            std::to_string(kEpSlots) + " in use)");
  }
  const int64_t session = ++g_last_session;
  // Every CreateEp writes the shared slot, as the seed's SelectBackend did.
  slot::Publish(selected);
  Backend* backend = selected;
  Backend* allocator_backend = selected;
  if (Enabled(Bug::kTornSlotWrite)) {
    // B8: the seed's EP captured its backend by reading the slot back (GetBackendFactory()) after
    // writing it; with the torn write, a concurrent construction makes the two fields disagree.
    const slot::Fields seen = slot::Read();
    backend = seen.backend;
    allocator_backend = seen.allocator_backend;
  }
  if (Enabled(Bug::kProgramsFreedOnLastRelease)) ProgramsUsed();
  shared::SessionCreated(backend);  // B20: a new context for the backend
  t_binding = SessionBinding{generation_, session, backend, allocator_backend};
  if (Enabled(Bug::kThreadLocalSlot)) t_session_backends[session] = backend;
  auto* created = new TestbedEp(*this, backend, allocator_backend, session);
  created->set_device(device, devices::Resolve(device));
  created->set_peers_at_creation(Track(created));
  *ep = created;
  return nullptr;
}

size_t TestbedFactory::Track(const TestbedEp* ep) {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  size_t peers = 0;
  for (const TestbedEp* other : sessions_) peers += other->backend() == ep->backend() ? 1 : 0;
  sessions_.push_back(ep);
  return peers;
}

void TestbedFactory::Forget(const TestbedEp* ep) {
  std::lock_guard<std::mutex> lock(sessions_mutex_);
  sessions_.erase(std::remove(sessions_.begin(), sessions_.end(), ep), sessions_.end());
}

void ORT_API_CALL TestbedFactory::ReleaseEpImpl(OrtEpFactory* this_ptr, OrtEp* ep) noexcept {
  auto* doomed = static_cast<TestbedEp*>(ep);
  // B10 (not a seed behaviour): the release path frees the EP but leaves it in the session list,
  // so the next CreateEp reads the freed object while counting peers. The count feeds only
  // diagnostics, so outputs stay right; AddressSanitizer reports a heap-use-after-free.
  if (!Enabled(Bug::kUseAfterRelease)) static_cast<TestbedFactory*>(this_ptr)->Forget(doomed);
  if (Enabled(Bug::kProgramsFreedOnLastRelease)) ProgramsDropped();
  shared::SessionReleased(doomed->backend());  // B20: destroys the backend's shared context
  if (Enabled(Bug::kReleaseFreesSessionBlocks)) {
    // B23: the session's blocks are freed with it, as a per-session pool torn down with the EP.
    // ORT keeps a session's allocator, and the tensors made from it, alive past ReleaseSession
    // (a C or C++ application's outputs outlive their session), so this frees live memory.
    Backend* pool = doomed->allocator_backend();
    for (void* p : devices::BlocksOf(doomed->session())) {
      if (pool->Owns(p) && !pool->Drop(p)) devices::MarkDropped(p);
    }
  }
  delete doomed;  // last: the EP's destructor may drop the factory's final reference
}

OrtStatus* ORT_API_CALL TestbedFactory::CreateAllocatorImpl(OrtEpFactory* this_ptr, const OrtMemoryInfo* memory_info,
                                                            const OrtKeyValuePairs* /*allocator_options*/,
                                                            OrtAllocator** allocator) noexcept {
  auto* self = static_cast<TestbedFactory*>(this_ptr);
  *allocator = nullptr;
  TESTBED_API_BEGIN
  RETURN_ERROR_IF(memory_info != nullptr && !IsTestbedMemory(EpApi().MemoryInfo_GetMemoryDevice(memory_info)),
                  "RacefuzzTestbed: CreateAllocator was asked for memory this EP does not provide.");
  // The environment's shared allocator (at registration, or an application's replacement);
  // under B4 it also serves the session whose CreateEp just ran on this thread (tagged so that
  // the trace can name it). Without B4 a binding left on this thread is no session's business.
  AllocatorOwner owner;
  const SessionBinding* binding = BindingOnThisThread(self->generation_);
  if (binding != nullptr && Enabled(Bug::kAllocatorFollowsSlot)) {
    owner = AllocatorOwner{binding->session, binding->backend};
  }
  // The device asked for: its blocks go to that device's pool, labelled with it.
  const int device = memory_info == nullptr ? 0
                                            : static_cast<int>(EpApi().MemoryDevice_GetDeviceId(
                                                  EpApi().MemoryInfo_GetMemoryDevice(memory_info)));
  auto* made = new BackendAllocator(*self, /*bound: follow the slot*/ nullptr, owner, Placement{device, device, 0});
  // Another environment allocator of this device is alive: ORT is replacing it (an application's
  // CreateSharedAllocator). Its blocks stay valid until freed, except under B14.
  if (made->env_level() && devices::EnvAllocatorMade(device) && Enabled(Bug::kSharedAllocatorReplaced)) {
    devices::RetireEnvBlocks(device);
  }
  *allocator = made;
  return nullptr;
  TESTBED_API_END
}

void ORT_API_CALL TestbedFactory::ReleaseAllocatorImpl(OrtEpFactory* /*this_ptr*/, OrtAllocator* allocator) noexcept {
  // ORT releases allocators from both CreateAllocator paths here; they are all BackendAllocators.
  auto* released = static_cast<BackendAllocator*>(allocator);
  if (released->env_level()) devices::EnvAllocatorReleased(released->device());
  delete released;
}

OrtStatus* ORT_API_CALL TestbedFactory::CreateDataTransferImpl(OrtEpFactory* this_ptr,
                                                               OrtDataTransferImpl** data_transfer) noexcept {
  auto* self = static_cast<TestbedFactory*>(this_ptr);
  *data_transfer = nullptr;
  TESTBED_API_BEGIN
  using Mode = DataTransfer::Mode;
  if (Enabled(Bug::kLatchOnce)) {
    *data_transfer = &DataTransfer::SharedLatchOnce();
    return nullptr;
  }
  const SessionBinding* binding = BindingOnThisThread(self->generation_);
  const int64_t session = binding != nullptr ? binding->session : 0;
  if (Enabled(Bug::kEagerSnapshot)) {
    // B2, 3fb9104: snapshot the slot in the constructor. At registration no CreateEp has run, so
    // instance #1 freezes null.
    *data_transfer = new DataTransfer(Mode::kFrozen, slot::Read().backend, session);
  } else if (binding != nullptr && !Enabled(Bug::kLazyReresolve)) {
    // Fixed: a per-session instance is frozen to its own session's backend, which cannot change.
    *data_transfer = new DataTransfer(Mode::kFrozen, binding->backend, session);
  } else {
    // The registration-time instance stays lazy (compare-and-recreate). B3 makes the per-session
    // instances lazy too, so they follow whichever session selected a backend last.
    *data_transfer = new DataTransfer(Mode::kLazy, nullptr, session);
  }
  return nullptr;
  TESTBED_API_END
}

bool ORT_API_CALL TestbedFactory::IsStreamAwareImpl(const OrtEpFactory* /*this_ptr*/) noexcept { return true; }

OrtStatus* ORT_API_CALL TestbedFactory::CreateSyncStreamForDeviceImpl(OrtEpFactory* /*this_ptr*/,
                                                                      const OrtMemoryDevice* /*memory_device*/,
                                                                      const OrtKeyValuePairs* /*stream_options*/,
                                                                      OrtSyncStreamImpl** stream) noexcept {
  *stream = nullptr;
  TESTBED_API_BEGIN
  *stream = new StreamImpl(nullptr, NewDeviceQueue());  // outside any session: an asynchronous device queue
  return nullptr;
  TESTBED_API_END
}

}  // namespace testbed
