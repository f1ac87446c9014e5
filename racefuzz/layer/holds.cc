// Scheduling points (holds.h) and the C functions racefuzz's worker calls through ctypes.
#include "holds.h"

#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <utility>

namespace rflayer {

namespace {

// Names as schedules write them (`hold s1 [compute]`), in `Point` order.
constexpr const char* kPointNames[] = {"run-start", "compute", "compute-end", "copy", "run-end"};
static_assert(sizeof kPointNames / sizeof kPointNames[0] == static_cast<int>(Point::kCount));

struct Holds {
  std::mutex mu;
  std::condition_variable resumed;
  std::set<std::pair<std::string, int>> armed;  // (session, point), each fires once
  std::multiset<std::string> parked;            // sessions with a thread parked now
  std::map<std::string, uint64_t> generation;   // bumped by each resume of a session
};

Holds& State() {
  static auto* holds = new Holds;  // never destroyed: EP threads may park during exit
  return *holds;
}

}  // namespace

void HoldAt(const std::string& tag, Point point) {
  if (tag.empty()) return;
  Holds& h = State();
  std::unique_lock<std::mutex> lock(h.mu);
  if (h.armed.erase({tag, static_cast<int>(point)}) == 0) return;
  const uint64_t seen = h.generation[tag];
  auto it = h.parked.insert(tag);
  h.resumed.wait_for(lock, std::chrono::milliseconds(kHoldLimitMs),
                     [&] { return h.generation[tag] != seen; });
  h.parked.erase(it);
}

}  // namespace rflayer

using rflayer::State;

// 0 when armed, -1 for a point the layer does not have.
extern "C" __attribute__((visibility("default"))) int RacefuzzLayer_Arm(const char* tag,
                                                                        const char* point) {
  for (int i = 0; i < static_cast<int>(rflayer::Point::kCount); i++) {
    if (std::strcmp(point, rflayer::kPointNames[i]) != 0) continue;
    std::lock_guard<std::mutex> lock(State().mu);
    State().armed.insert({tag, i});
    return 0;
  }
  return -1;
}

// The sessions with a thread parked now, comma-separated into `out`; returns the length needed
// (without the terminating zero), so a short buffer can be retried.
extern "C" __attribute__((visibility("default"))) size_t RacefuzzLayer_Parked(char* out,
                                                                              size_t size) {
  std::string text;
  {
    std::lock_guard<std::mutex> lock(State().mu);
    for (const auto& tag : State().parked) text += (text.empty() ? "" : ",") + tag;
  }
  if (size > 0) {
    const size_t n = text.size() < size - 1 ? text.size() : size - 1;
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return text.size();
}

// Releases every thread parked for `tag` (NULL: every session) and disarms its points.
extern "C" __attribute__((visibility("default"))) void RacefuzzLayer_Resume(const char* tag) {
  auto& h = State();
  {
    std::lock_guard<std::mutex> lock(h.mu);
    for (auto it = h.armed.begin(); it != h.armed.end();) {
      it = (tag == nullptr || it->first == tag) ? h.armed.erase(it) : std::next(it);
    }
    if (tag != nullptr) {
      h.generation[tag]++;
    } else {
      for (const auto& parked : h.parked) h.generation[parked]++;
    }
  }
  h.resumed.notify_all();
}
