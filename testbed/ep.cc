#include "ep.h"

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <unordered_map>

#include <vector>

#include "allocator.h"
#include "backends/backend.h"
#include "bugs.h"
#include "devices.h"
#include "factory.h"
#include "status.h"
#include "stream.h"
#include "stream_copy.h"
#include "trace.h"

namespace testbed {
namespace {

bool IsFloatTensor(const OrtValueInfo* info) {
  const OrtTypeInfo* type_info = nullptr;
  const OrtTensorTypeAndShapeInfo* tensor_info = nullptr;
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  if (info == nullptr) return false;
  if (TakeMessage(Api().GetValueInfoTypeInfo(info, &type_info)).size() || type_info == nullptr) return false;
  if (TakeMessage(Api().CastTypeInfoToTensorInfo(type_info, &tensor_info)).size() || tensor_info == nullptr) {
    return false;
  }
  return TakeMessage(Api().GetTensorElementType(tensor_info, &type)).empty() &&
         type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
}

bool AllFloat(const OrtNode* node, bool inputs) {
  size_t count = 0;
  if (TakeMessage(inputs ? Api().Node_GetNumInputs(node, &count) : Api().Node_GetNumOutputs(node, &count)).size()) {
    return false;
  }
  std::vector<const OrtValueInfo*> infos(count);
  if (count > 0 && TakeMessage(inputs ? Api().Node_GetInputs(node, infos.data(), count)
                                      : Api().Node_GetOutputs(node, infos.data(), count)).size()) {
    return false;
  }
  for (const OrtValueInfo* info : infos) {
    if (!IsFloatTensor(info)) return false;
  }
  return true;
}

bool Supported(const OrtNode* node) {
  const char* op_type = nullptr;
  const char* domain = nullptr;
  if (TakeMessage(Api().Node_GetOperatorType(node, &op_type)).size()) return false;
  if (TakeMessage(Api().Node_GetDomain(node, &domain)).size()) return false;
  return IsSupportedOp(domain, op_type) && AllFloat(node, true) && AllFloat(node, false);
}

OrtStatus* TensorShape(const OrtValue* value, Shape& shape) {
  OrtTensorTypeAndShapeInfo* info = nullptr;
  RETURN_IF_ERROR(Api().GetTensorTypeAndShape(value, &info));
  size_t rank = 0;
  OrtStatus* status = Api().GetDimensionsCount(info, &rank);
  shape.assign(rank, 0);
  if (status == nullptr && rank > 0) status = Api().GetDimensions(info, shape.data(), rank);
  Api().ReleaseTensorTypeAndShapeInfo(info);
  return status;
}

// One compiled partition: ORT calls Compute on it for every run.
struct ComputeInfo : OrtNodeComputeInfo {
  ComputeInfo(TestbedEp& owner, std::shared_ptr<const Program> compiled)
      : OrtNodeComputeInfo{}, ep(owner), program(std::move(compiled)) {
    ort_version_supported = ORT_API_VERSION;
    CreateState = CreateStateImpl;
    Compute = ComputeImpl;
    ReleaseState = ReleaseStateImpl;
  }

  static OrtStatus* ORT_API_CALL CreateStateImpl(OrtNodeComputeInfo* this_ptr, OrtNodeComputeContext* /*context*/,
                                                 void** state) noexcept {
    *state = this_ptr;
    return nullptr;
  }

  static OrtStatus* ORT_API_CALL ComputeImpl(OrtNodeComputeInfo* this_ptr, void* /*state*/,
                                             OrtKernelContext* context) noexcept {
    auto* self = static_cast<ComputeInfo*>(this_ptr);
    TESTBED_API_BEGIN
    return self->ep.Compute(self->program, context);
    TESTBED_API_END
  }

  static void ORT_API_CALL ReleaseStateImpl(OrtNodeComputeInfo* /*this_ptr*/, void* /*state*/) noexcept {}

  TestbedEp& ep;
  std::shared_ptr<const Program> program;
};

// Launches per session, process-wide, as a profiler would keep them (diagnostics only).
std::mutex g_launches_mutex;
std::unordered_map<int64_t, uint64_t> g_launches;

// The pipeline cache's epoch, process-wide: every CreateEp and ReleaseEp flushes the cache (to pick
// up the new session's options, to drop the old one's pipelines) and bumps it.
std::atomic<uint64_t> g_pipeline_epoch{0};

void CountLaunch(int64_t session) {
  // B9 (not a seed behaviour): the table is updated without its lock, "because it is only
  // statistics". Two sessions computing at once insert into it together: a rehash under another
  // thread's insert corrupts the heap once in a long while and outputs never show it;
  // ThreadSanitizer reports it whenever the two launches overlap (nothing orders them).
  if (Enabled(Bug::kUnlockedLaunchTable)) {
    ++g_launches[session];
    return;
  }
  std::lock_guard<std::mutex> lock(g_launches_mutex);
  ++g_launches[session];
}

}  // namespace

TestbedEp::TestbedEp(TestbedFactory& factory, Backend* backend, Backend* allocator_backend, int64_t session)
    : OrtEp{},
      factory_(factory),
      backend_(backend),
      allocator_backend_(allocator_backend),
      session_(session),
      stream_(std::make_shared<SessionStream>(backend == &MgxBackend(), session)) {
  ort_version_supported = ORT_API_VERSION;
  GetName = GetNameImpl;
  GetCapability = GetCapabilityImpl;
  Compile = CompileImpl;
  ReleaseNodeComputeInfos = ReleaseNodeComputeInfosImpl;
  // B4: OrtEp::CreateAllocator left unset, so ORT falls back to the factory allocator, which
  // re-reads the shared slot on every Alloc/Free (gpu_ep::Allocator::GetBackendAllocator): a later
  // session's CreateEp redirects this session's allocations.
  CreateAllocator = Enabled(Bug::kAllocatorFollowsSlot) ? nullptr : CreateAllocatorImpl;
  CreateSyncStreamForDevice = CreateSyncStreamForDeviceImpl;
  Sync = SyncImpl;
  OnRunStart = OnRunStartImpl;
  OnRunEnd = OnRunEndImpl;
  factory_.Ref();
  g_pipeline_epoch.fetch_add(1);
}

TestbedEp::~TestbedEp() {
  g_pipeline_epoch.fetch_add(1);
  stream_.reset();  // the streams ORT released before this hold the only queues
  factory_.Unref();
}

const char* ORT_API_CALL TestbedEp::GetNameImpl(const OrtEp* /*this_ptr*/) noexcept { return kEpName; }

OrtStatus* ORT_API_CALL TestbedEp::GetCapabilityImpl(OrtEp* /*this_ptr*/, const OrtGraph* graph,
                                                     OrtEpGraphSupportInfo* graph_support_info) noexcept {
  TESTBED_API_BEGIN
  size_t count = 0;
  RETURN_IF_ERROR(Api().Graph_GetNumNodes(graph, &count));
  if (count == 0) return nullptr;
  std::vector<const OrtNode*> nodes(count);
  RETURN_IF_ERROR(Api().Graph_GetNodes(graph, nodes.data(), count));
  // All or nothing: a partial claim would put CPU nodes between ours and make ORT insert Memcpy
  // nodes. A model with any other op simply runs on the CPU EP.
  for (const OrtNode* node : nodes) {
    if (!Supported(node)) return nullptr;
  }
  OrtNodeFusionOptions options{};
  options.ort_version_supported = ORT_API_VERSION;
  options.drop_constant_initializers = true;  // Compile keeps its own copy of the weights
  return EpApi().EpGraphSupportInfo_AddNodesToFuse(graph_support_info, nodes.data(), nodes.size(), &options);
  TESTBED_API_END
}

OrtStatus* ORT_API_CALL TestbedEp::CompileImpl(OrtEp* this_ptr, const OrtGraph** graphs, const OrtNode** fused_nodes,
                                               size_t count, OrtNodeComputeInfo** node_compute_infos,
                                               OrtNode** /*ep_context_nodes: no EPContext models*/) noexcept {
  auto* self = static_cast<TestbedEp*>(this_ptr);
  for (size_t i = 0; i < count; ++i) node_compute_infos[i] = nullptr;
  TESTBED_API_BEGIN
  for (size_t i = 0; i < count; ++i) {
    auto program = std::make_shared<Program>();
    RETURN_IF_ERROR(BuildProgram(graphs[i], fused_nodes[i], *program));
    node_compute_infos[i] = new ComputeInfo(*self, std::move(program));
  }
  return nullptr;
  TESTBED_API_END
}

void ORT_API_CALL TestbedEp::ReleaseNodeComputeInfosImpl(OrtEp* /*this_ptr*/, OrtNodeComputeInfo** infos,
                                                         size_t count) noexcept {
  for (size_t i = 0; i < count; ++i) delete static_cast<ComputeInfo*>(infos[i]);
}

OrtStatus* ORT_API_CALL TestbedEp::CreateAllocatorImpl(OrtEp* this_ptr, const OrtMemoryInfo* memory_info,
                                                       OrtAllocator** allocator) noexcept {
  auto* self = static_cast<TestbedEp*>(this_ptr);
  *allocator = nullptr;
  TESTBED_API_BEGIN
  RETURN_ERROR_IF(memory_info != nullptr && !IsTestbedMemory(EpApi().MemoryInfo_GetMemoryDevice(memory_info)),
                  "RacefuzzTestbed: CreateAllocator was asked for memory this EP does not provide.");
  const AllocatorOwner owner{self->session_, self->backend_};
  const Placement placement{self->label_device_, self->device_, self->session_};
  Backend* backend = self->allocator_backend_;
  // The seed's third commit: try the backend's own OrtEp allocator hook first (DirectML has one)...
  if (backend->HasEpAllocatorHook()) {
    *allocator = new BackendAllocator(self->factory_, backend, owner, placement);
    return nullptr;
  }
  // B6: EP_CALL_S treats a null function pointer as success, so for MIGraphX (no hook) this
  // returns OK with *allocator left unset. The fix added an explicit null check.
  if (Enabled(Bug::kNullHookIsSuccess)) return nullptr;
  // ...and fall back to the backend factory's allocator (MIGraphX, HIP). Both resolve per EP.
  *allocator = new BackendAllocator(self->factory_, backend, owner, placement);
  return nullptr;
  TESTBED_API_END
}

OrtStatus* ORT_API_CALL TestbedEp::CreateSyncStreamForDeviceImpl(OrtEp* this_ptr,
                                                                 const OrtMemoryDevice* /*memory_device*/,
                                                                 OrtSyncStreamImpl** stream) noexcept {
  auto* self = static_cast<TestbedEp*>(this_ptr);
  *stream = nullptr;
  TESTBED_API_BEGIN
  *stream = new StreamImpl(self->stream_, self->stream_->NewQueue());
  return nullptr;
  TESTBED_API_END
}

OrtStatus* ORT_API_CALL TestbedEp::SyncImpl(OrtEp* this_ptr) noexcept {
  TESTBED_API_BEGIN
  // IOBinding's synchronize_inputs/outputs: wait for every stream of the session. B7 removes every
  // sync point (the seed had none).
  if (!Enabled(Bug::kNoComputeSync)) static_cast<TestbedEp*>(this_ptr)->stream_->Sync();
  return nullptr;
  TESTBED_API_END
}

OrtStatus* ORT_API_CALL TestbedEp::OnRunStartImpl(OrtEp* this_ptr, const OrtRunOptions* /*run_options*/) noexcept {
  TESTBED_API_BEGIN
  auto* self = static_cast<TestbedEp*>(this_ptr);
  EnterRun(self->session_);
  self->run_epoch_.store(g_pipeline_epoch.load());  // the run's pipelines are looked up here
  return nullptr;
  TESTBED_API_END
}

OrtStatus* ORT_API_CALL TestbedEp::OnRunEndImpl(OrtEp* this_ptr, const OrtRunOptions* /*run_options*/,
                                                bool /*sync_stream: the streams' OnSessionRunEnd drain*/) noexcept {
  TESTBED_API_BEGIN
  LeaveRun(static_cast<TestbedEp*>(this_ptr)->session_);
  return nullptr;
  TESTBED_API_END
}

Backend* TestbedEp::LaunchBackend() const {
  // B5, the rejected per-thread design: the session's backend lives in per-thread state written
  // by CreateEp, so a Run on any other thread finds none and the launch is silently dropped: the
  // outputs keep the zero fill of their fresh allocation.
  return Enabled(Bug::kThreadLocalSlot) ? SessionBackendOnThisThread(session_) : backend_;
}

OrtStatus* TestbedEp::Compute(const std::shared_ptr<const Program>& program, OrtKernelContext* context) {
  size_t num_inputs = 0;
  size_t num_outputs = 0;
  RETURN_IF_ERROR(Api().KernelContext_GetInputCount(context, &num_inputs));
  RETURN_IF_ERROR(Api().KernelContext_GetOutputCount(context, &num_outputs));
  std::vector<DeviceTensor> inputs(num_inputs), outputs;
  std::vector<Shape> input_shapes(num_inputs), output_shapes;
  for (size_t i = 0; i < num_inputs; ++i) {
    const OrtValue* value = nullptr;
    RETURN_IF_ERROR(Api().KernelContext_GetInput(context, i, &value));
    RETURN_IF_ERROR(TensorShape(value, input_shapes[i]));
    RETURN_IF_ERROR(Api().GetTensorData(value, &inputs[i].data));
    inputs[i].shape = input_shapes[i];
  }
  RETURN_IF_ERROR(InferShapes(*program, input_shapes, output_shapes));
  RETURN_ERROR_IF(output_shapes.size() != num_outputs, "RacefuzzTestbed: wrong number of outputs.");
  for (size_t i = 0; i < num_outputs; ++i) {
    OrtValue* value = nullptr;
    void* data = nullptr;
    const Shape& shape = output_shapes[i];
    RETURN_IF_ERROR(Api().KernelContext_GetOutput(context, i, shape.data(), shape.size(), &value));
    RETURN_IF_ERROR(Api().GetTensorMutableData(value, &data));
    outputs.push_back({data, shape});
  }

  Backend* backend = LaunchBackend();
  if (trace::On()) {
    const char* name = backend != nullptr ? backend->name() : "none";
    bool misroute = false;
    std::vector<trace::Buffer> ins, outs;
    for (const auto& t : inputs) ins.push_back({OwnerOf(t.data), true});
    for (const auto& t : outputs) outs.push_back({OwnerOf(t.data), true});
    for (const auto* list : {&ins, &outs}) {
      for (const auto& b : *list) misroute = misroute || b.owner != name;
    }
    trace::Compute(name, session_, ins, outs, misroute);
  }
  if (backend == nullptr) return nullptr;
  switch (FaultFor(backend->name())) {
    case Fault::kHang:  // a device that never completes: the racefuzz hang oracle's target
      for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
    case Fault::kSegv: {  // a real invalid access, not raise(): what a broken EP really does
      volatile int* null_pointer = nullptr;
      *null_pointer = 1;
      break;
    }
    case Fault::kLeak: {  // memory that is touched and never freed: the leak oracle's target
      constexpr size_t kLeaked = size_t{64} << 20;
      auto* block = static_cast<volatile char*>(std::malloc(kLeaked));
      for (size_t i = 0; block != nullptr && i < kLeaked; i += 4096) block[i] = 1;
      break;
    }
    case Fault::kNone:
      break;
  }

  // B21: the pipelines this run looked up at OnRunStart were flushed by another session's
  // CreateEp or ReleaseEp since; the stale handles launch nothing, and the outputs keep their
  // fill. A window of microseconds between a run's start and its Compute.
  if (Enabled(Bug::kPipelinesFlushedMidRun) && g_pipeline_epoch.load() != run_epoch_.load()) return nullptr;
  RETURN_IF_ERROR(devices::CheckLaunch(*backend, session_, device_, inputs, outputs));
  RETURN_IF_ERROR(LaunchOnStream(*backend, program, inputs, outputs, context));
  CountLaunch(session_);
  return nullptr;
}

WorkQueue* TestbedEp::LaunchQueue(WorkQueue* kernel_queue) const {
  // B17, after onnxruntime#19275 (runs from several threads on one CUDA session, each thread
  // with its own current stream): the launch goes to the calling thread's stream instead of the
  // kernel context's. A thread inside a run of this session (it called OnRunStart: run, or
  // run_async's pool thread) has that run's stream current, so only a Compute ORT moves to another
  // thread (ORT_PARALLEL's inter-op pool) lands on a queue of its own that no one waits for.
  if (!Enabled(Bug::kPerThreadStream) || InRunOnThisThread(session_)) return kernel_queue;
  thread_local std::shared_ptr<WorkQueue> own = NewDeviceQueue();
  return own.get();
}

OrtStatus* TestbedEp::LaunchOnStream(Backend& backend, const std::shared_ptr<const Program>& program,
                                     const std::vector<DeviceTensor>& inputs, const std::vector<DeviceTensor>& outputs,
                                     OrtKernelContext* context) {
  OrtSyncStream* ort_stream = nullptr;
  RETURN_IF_ERROR(Api().KernelContext_GetSyncStream(context, &ort_stream));
  WorkQueue* queue = StreamImpl::QueueOf(ort_stream);
  if (queue == nullptr || stream_->OnCreatingThread()) {
    // Inline, the creating thread's synchronous default stream: it still comes after what was
    // queued on the kernel's stream (the feed uploads, the outputs' fills). Without a stream of
    // ours, after everything the session queued.
    if (queue != nullptr) {
      // B13, after the run_async/terminate family (onnxruntime#17149): the EP skips the drain on
      // a stream another run still holds, counting on that run's end to drain it. A terminated
      // run never reaches OnSessionRunEnd, so its stream comes back marked and this run computes
      // before its own feed upload (and the outputs' zero fill) lands.
      const bool held = Enabled(Bug::kTerminatedStreamBusy) && StreamImpl::BusyWithOtherRun(ort_stream, CurrentRun());
      if (!held) queue->Drain();
    } else {
      stream_->Sync();
    }
    return backend.Launch(program, inputs, outputs, nullptr);
  }
  RETURN_IF_ERROR(backend.Launch(program, inputs, outputs, LaunchQueue(queue)));
  // The seed's #86: sync the stream at the end of every Compute, so that a Run from a thread other
  // than the creating one does not return before the device work is done. B7 drops it.
  if (!Enabled(Bug::kNoComputeSync)) queue->Drain();
  return nullptr;
}

}  // namespace testbed
