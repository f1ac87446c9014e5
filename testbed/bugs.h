// Fault injection: which of the seed's historic behaviours are switched back on.
//
// RACEFUZZ_TESTBED_BUGS=B1,B3 is read once, when the library is loaded; with nothing set the EP
// is the seed's final fixed design. Code paths ask `Enabled(Bug::kX)` and nothing else: no
// #ifdefs, no second way to switch a behaviour.
#pragma once

#include <string>

namespace testbed {

enum class Bug : int {
  kLatchOnce = 1,        // B1: pre-3fb9104, DataTransfer latches the first backend forever
  kEagerSnapshot,        // B2: 3fb9104, each DataTransfer snapshots the slot in its constructor
  kLazyReresolve,        // B3: per-session DataTransfer re-reads the global slot on every use
  kAllocatorFollowsSlot, // B4: no OrtEp::CreateAllocator; the factory allocator re-reads the slot
  kThreadLocalSlot,      // B5: the rejected per-thread design: slot and session state thread_local
  kNullHookIsSuccess,    // B6: EP_CALL_S treats a null backend allocator hook as success
  kNoComputeSync,        // B7: no per-Compute sync (#86), D2H not ordered on the stream
  kTornSlotWrite,        // B8: the slot is two fields written one after the other
  // Not seed behaviours: memory-safety bugs that outputs never show, for the sanitizer oracle.
  kUnlockedLaunchTable,  // B9: the process-wide launch table is updated without its lock
  kUseAfterRelease,      // B10: ReleaseEp leaves the freed EP in the factory's session list
  // Not seed behaviours: stream ordering, after public ORT reports (see stream_copy.h).
  kCopyOffStream,        // B11: env-level uploads on a stream go to a separate copy queue
  kBindDropsStream,      // B12: a session's bind-time upload ignores its stream
  kTerminatedStreamBusy, // B13: a stream stays marked busy after a terminated run
  kSharedAllocatorReplaced,  // B14: a new env allocator for a device retires the old one's blocks
  // Several sessions and devices.
  kPerSessionPool = 15,      // B15: a session's blocks are valid only in that session's launches
  kFirstDeviceLatched = 16,  // B16: the first CreateEp's device is used by every later session
  kPerThreadStream = 17,     // B17: a launch goes to the calling thread's stream, not the kernel's
  // Not seed behaviours: one defect that many ops reach, for racefuzz's own preflight and dedup.
  kProgramsFreedOnLastRelease = 18,  // B18: the last ReleaseEp frees what the next CreateEp uses
  kPoolIndexLatched = 19,            // B19: the block check's pool index exists for one backend only
  kReleaseDestroysContext = 20,      // B20: any ReleaseEp destroys its backend's shared context
  // Not a seed behaviour: a window a Python thread can hardly aim at (the layer's scheduling
  // points can): another session's CreateEp or ReleaseEp between a run's start and its Compute.
  kPipelinesFlushedMidRun = 21,  // B21: CreateEp/ReleaseEp flush pipelines a run in flight holds
  // Not a seed behaviour: a kept value a session reads in place, after public reports.
  kUpdateOffStream = 22,  // B22: an upload into a written block goes to the copy engine
  // Not a seed behaviour: memory a C or C++ application still holds after ReleaseSession.
  kReleaseFreesSessionBlocks = 23,  // B23: ReleaseEp frees the blocks its allocator handed out
  // Not a seed behaviour: state a long-lived process gathers across many sessions.
  kEpSlotsNeverReturned = 24,  // B24: each CreateEp takes one of 32 slots; ReleaseEp never returns it
};

inline constexpr int kBugCount = 24;

bool Enabled(Bug bug);

// "B1,B3" style list of the switches in force, for logs.
std::string EnabledList();

// Not a seed behaviour: RACEFUZZ_TESTBED_FAULT=hang:<profile>, segv:<profile> or leak:<profile>
// makes every Compute on that backend block forever, dereference null or keep 64 MiB it never
// frees. It exists so that racefuzz's own crash, hang and leak handling is tested against a
// real native hang, a real SIGSEGV and real memory growth.
enum class Fault : int { kNone = 0, kHang, kSegv, kLeak };
Fault FaultFor(const char* backend_name);

}  // namespace testbed
