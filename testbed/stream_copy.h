// Where a copy runs: on its stream, at once, or after the device barrier.
//
// The fixed design follows HIP's rules: a copy with a stream is queued on that stream; a copy
// without one acts as the legacy default stream does and first waits for every queue of the
// device. Two bug switches route copies elsewhere, each after a public report:
// - B11 (onnxruntime#16774): an env-level upload that carries a stream goes to the backend's own
//   copy queue instead, so a later read ordered on the stream does not wait for it;
// - B12 (onnxruntime#32643, fixed by #32666): a session's bind-time upload drops its stream and
//   copies at once, so the zero fill AllocOnStream queued on that stream lands over it.
// Also here: which sessions the calling thread is inside a Run of (OrtEp::OnRunStart/OnRunEnd),
// which is how B12 tells IOBinding's bind-time upload from a run's feed copy.
#pragma once

#include <cstdint>

#include "onnxruntime_c_api.h"

namespace testbed {

class WorkQueue;

struct CopyRoute {
  WorkQueue* queue = nullptr;  // the queue the copy goes to; null: copied at once
  bool barrier = false;        // wait for every device queue before copying at once
};

// `session` is the DataTransfer's session, 0 for the registration-time (env-level) instance.
CopyRoute RouteCopy(OrtSyncStream* stream, int64_t session, bool src_on_device, bool dst_on_device);

// B22, after onnxruntime#32445/#17336 (an input updated in place between runs of fixed
// buffers): an environment upload without a stream into a block an earlier upload filled is
// taken as a weights update and queued on the copy engine, 20 ms behind, without waiting. ORT
// documents a copy without a stream as complete on return; a read without a stream still sees
// the new bytes (the device barrier drains the engine), but a run reading the block in place
// computes on the old ones. `dst` is the destination block.
CopyRoute RouteUpdate(CopyRoute route, OrtSyncStream* stream, int64_t session, bool src_on_device,
                      bool dst_on_device, const void* dst, bool asynchronous_backend);

void EnterRun(int64_t session);
void LeaveRun(int64_t session);
// A process-wide serial of the calling thread's latest OnRunStart (0: none yet), which B13's
// stream mark records.
uint64_t CurrentRun();
// Whether the calling thread is inside a run of `session` (between OnRunStart and OnRunEnd).
bool InRunOnThisThread(int64_t session);

}  // namespace testbed
