#include "stream_copy.h"

#include <atomic>
#include <chrono>
#include <memory>
#include <thread>
#include <unordered_map>

#include "bugs.h"
#include "devices.h"
#include "stream.h"

namespace testbed {
namespace {

// Runs the calling thread is inside, per session (OnRunStart/OnRunEnd come on the run's thread).
thread_local std::unordered_map<int64_t, int> t_runs;
thread_local uint64_t t_run = 0;
std::atomic<uint64_t> g_runs{0};

// B11's separate copy engine: a device queue of its own, never a stream anyone waits on.
WorkQueue* CopyEngineQueue() {
  static auto* engine = new std::shared_ptr<WorkQueue>(NewDeviceQueue());  // lives for the process
  return engine->get();
}

}  // namespace

CopyRoute RouteCopy(OrtSyncStream* stream, int64_t session, bool src_on_device, bool dst_on_device) {
  WorkQueue* queue = StreamImpl::QueueOf(stream);
  // B7 removes every sync point: a copy without a stream waits for nothing.
  if (queue == nullptr) return {nullptr, !Enabled(Bug::kNoComputeSync)};
  const bool upload = dst_on_device && !src_on_device;
  // B11, after onnxruntime#16774 (copies issued off the stream the work is ordered on): the
  // env-level DataTransfer sends an upload that carries a stream to the copy engine's own queue
  // and does not wait. A read ordered on the stream then finds the device buffer still unwritten.
  if (upload && session == 0 && Enabled(Bug::kCopyOffStream)) return {CopyEngineQueue(), false};
  // B12, after onnxruntime#32643 (fixed by #32666, "preserve streams in single-tensor data
  // transfers"): the session's upload outside any run (only IOBinding's bind_cpu_input makes one)
  // ignores its stream and copies at once; the zero fill AllocOnStream queued on that stream for
  // the same buffer lands afterwards and wipes the input.
  if (upload && session != 0 && Enabled(Bug::kBindDropsStream) && !InRunOnThisThread(session)) {
    return {nullptr, false};
  }
  // B13's busy mark: a session stream's first work inside a run claims the stream for that run.
  if (session != 0 && InRunOnThisThread(session)) StreamImpl::MarkBusy(stream, t_run);
  return {queue, false};
}

CopyRoute RouteUpdate(CopyRoute route, OrtSyncStream* stream, int64_t session, bool src_on_device,
                      bool dst_on_device, const void* dst, bool asynchronous_backend) {
  const bool env_upload = stream == nullptr && session == 0 && dst_on_device && !src_on_device;
  if (!env_upload) return route;
  const bool rewritten = devices::MarkWritten(dst);
  if (!rewritten || !asynchronous_backend || !Enabled(Bug::kUpdateOffStream)) return route;
  WorkQueue* engine = CopyEngineQueue();
  engine->Enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  return {engine, false};
}

void EnterRun(int64_t session) {
  ++t_runs[session];
  t_run = ++g_runs;
}

uint64_t CurrentRun() { return t_run; }

bool InRunOnThisThread(int64_t session) {
  auto it = t_runs.find(session);
  return it != t_runs.end() && it->second > 0;
}

void LeaveRun(int64_t session) {
  auto it = t_runs.find(session);
  if (it != t_runs.end() && --it->second <= 0) t_runs.erase(it);
}

}  // namespace testbed
