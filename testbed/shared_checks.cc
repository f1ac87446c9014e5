#include "shared_checks.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include "backends/backend.h"
#include "bugs.h"
#include "status.h"

namespace testbed {
namespace shared {
namespace {

int IndexOf(const Backend& backend) { return std::strcmp(backend.name(), "mgx") == 0 ? 1 : 0; }

// B19's lookup table: one entry per backend, only the first checker's is ever built. Atomic
// loads, so the compiler cannot assume the pointer is set and drop the fault.
struct PoolIndex {
  std::atomic<long> lookups{0};
};
std::atomic<PoolIndex*> g_pool_index[2];
std::once_flag g_pool_index_built;

// B20's contexts, one per backend: true once a release destroyed it.
std::atomic<bool> g_context_gone[2];

}  // namespace

// Its own translation unit and never inlined into a caller: the faulting frame is this helper
// whichever op (copy or launch, run or feed) called it.
#if defined(_MSC_VER)
__declspec(noinline)
#else
__attribute__((noinline))
#endif
void FindPool(const Backend& backend, const void* /*block*/) {
  if (!Enabled(Bug::kPoolIndexLatched)) return;
  // B19 (not a seed behaviour): the index is built once, sized for whichever backend checks a
  // block first, as B1 latches its DataTransfer. The other backend's entry stays null.
  std::call_once(g_pool_index_built, [&] { g_pool_index[IndexOf(backend)].store(new PoolIndex); });
  PoolIndex* index = g_pool_index[IndexOf(backend)].load();
  index->lookups.fetch_add(1);  // null for the backend that came second: SIGSEGV here
}

OrtStatus* CheckContext(const Backend& backend) {
  if (!Enabled(Bug::kReleaseDestroysContext) || !g_context_gone[IndexOf(backend)].load()) return nullptr;
  return Error("RacefuzzTestbed: the device context was destroyed by a session release; create a session to make a new one.");
}

void SessionCreated(const Backend* backend) {
  if (backend != nullptr && Enabled(Bug::kReleaseDestroysContext)) g_context_gone[IndexOf(*backend)].store(false);
}

void SessionReleased(const Backend* backend) {
  // B20 (not a seed behaviour): each ReleaseEp releases the device context its backend's sessions
  // share (a hipDevicePrimaryCtxRelease per session, with no count of the sessions still using
  // it). Copies and launches for sessions and device values still alive then fail.
  if (backend != nullptr && Enabled(Bug::kReleaseDestroysContext)) g_context_gone[IndexOf(*backend)].store(true);
}

}  // namespace shared
}  // namespace testbed
