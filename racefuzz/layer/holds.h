// Scheduling points: where racefuzz can park a session's thread inside the EP's ABI.
//
// A schedule's `hold sN [point]` step arms one point for session sN (named by the session
// config entry `racefuzz.session`); the next thread of that session to reach it parks there
// until the worker's sequencer resumes sN. So a window a Python thread can never aim at
// ("s1 between OnRunStart and Compute") becomes an ordinary step order. A park that nobody
// resumes ends by itself after kHoldLimitMs: a held thread that the next step needs (a lock it
// holds, the GIL) must not hang the run.
#pragma once

#include <string>

namespace rflayer {

enum class Point : int { kRunStart = 0, kCompute, kComputeEnd, kCopy, kRunEnd, kCount };

constexpr int kHoldLimitMs = 3000;

// At `point` of session `tag` (empty: no session, never held): park if armed for it.
void HoldAt(const std::string& tag, Point point);

}  // namespace rflayer
