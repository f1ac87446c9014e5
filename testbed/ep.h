// OrtEp: one per session. Claims whole graphs of MatMul/Add/Mul/Relu, compiles them to Programs
// and launches them on the session's backend.
//
// In the fixed design everything a session does resolves through per-EP state captured at
// CreateEp (backend_, allocator_backend_, stream_), never through the factory's shared slot:
// that is the seed's final answer to AIRADSW-750 and to the two-session reports. The bug switches
// that reintroduce shared or per-thread state do it here (B4, B5, B6, B7) or in the factory (B8).
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "kernels.h"
#include "onnxruntime_c_api.h"

namespace testbed {

class Backend;
struct DeviceTensor;
class SessionStream;
class WorkQueue;
class TestbedFactory;

class TestbedEp : public OrtEp {
 public:
  TestbedEp(TestbedFactory& factory, Backend* backend, Backend* allocator_backend, int64_t session);
  ~TestbedEp();
  TestbedEp(const TestbedEp&) = delete;
  TestbedEp& operator=(const TestbedEp&) = delete;

  Backend* backend() const { return backend_; }
  Backend* allocator_backend() const { return allocator_backend_; }
  int64_t session() const { return session_; }
  // Live sessions that shared this one's backend when it was created (diagnostics only).
  void set_peers_at_creation(size_t peers) { peers_at_creation_ = peers; }
  // The device ORT pinned the session to, and the one it really uses (they differ under B16).
  void set_device(int label, int device) {
    label_device_ = label;
    device_ = device;
  }

  // Runs one compiled partition for ORT's kernel context.
  OrtStatus* Compute(const std::shared_ptr<const Program>& program, OrtKernelContext* context);

 private:
  static const char* ORT_API_CALL GetNameImpl(const OrtEp* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL GetCapabilityImpl(OrtEp* this_ptr, const OrtGraph* graph,
                                                   OrtEpGraphSupportInfo* graph_support_info) noexcept;
  static OrtStatus* ORT_API_CALL CompileImpl(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes,
                                             size_t count, OrtNodeComputeInfo** node_compute_infos,
                                             OrtNode** ep_context_nodes) noexcept;
  static void ORT_API_CALL ReleaseNodeComputeInfosImpl(OrtEp* this_ptr, OrtNodeComputeInfo** node_compute_infos,
                                                       size_t num_node_compute_infos) noexcept;
  static OrtStatus* ORT_API_CALL CreateAllocatorImpl(OrtEp* this_ptr, const OrtMemoryInfo* memory_info,
                                                     OrtAllocator** allocator) noexcept;
  static OrtStatus* ORT_API_CALL CreateSyncStreamForDeviceImpl(OrtEp* this_ptr, const OrtMemoryDevice* memory_device,
                                                               OrtSyncStreamImpl** stream) noexcept;
  static OrtStatus* ORT_API_CALL SyncImpl(OrtEp* this_ptr) noexcept;
  static OrtStatus* ORT_API_CALL OnRunStartImpl(OrtEp* this_ptr, const OrtRunOptions* run_options) noexcept;
  static OrtStatus* ORT_API_CALL OnRunEndImpl(OrtEp* this_ptr, const OrtRunOptions* run_options,
                                              bool sync_stream) noexcept;

  // The queue a launch off the creating thread goes to: the kernel's (B17: the thread's own).
  WorkQueue* LaunchQueue(WorkQueue* kernel_queue) const;
  // Launches on the kernel's stream: inline on the creating thread, queued on any other.
  OrtStatus* LaunchOnStream(Backend& backend, const std::shared_ptr<const Program>& program,
                            const std::vector<DeviceTensor>& inputs, const std::vector<DeviceTensor>& outputs,
                            OrtKernelContext* context);

  // The backend this thread launches work for this session on (B5 changes the answer).
  Backend* LaunchBackend() const;

  TestbedFactory& factory_;
  Backend* const backend_;            // compute and this session's DataTransfer
  Backend* const allocator_backend_;  // this session's allocations
  const int64_t session_;
  std::shared_ptr<SessionStream> stream_;
  size_t peers_at_creation_ = 0;
  int label_device_ = 0;
  int device_ = 0;
  std::atomic<uint64_t> run_epoch_{0};  // the pipeline epoch at this session's last OnRunStart
};

}  // namespace testbed
