#include "bugs.h"

#include <array>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace testbed {
namespace {

std::string Trim(const std::string& s) {
  size_t begin = 0;
  size_t end = s.size();
  while (begin < end && std::isspace(static_cast<unsigned char>(s[begin]))) ++begin;
  while (end > begin && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
  return s.substr(begin, end - begin);
}

// Parsed once at load time by a static initialiser, so every later query is a plain read and
// a change of the environment variable after load has no effect (each scenario needs a fresh
// process, which is what makes a schedule replayable).
struct Switches {
  std::array<bool, kBugCount + 1> on{};

  Switches() {
    const char* raw = std::getenv("RACEFUZZ_TESTBED_BUGS");
    if (raw == nullptr) return;
    std::string unknown;
    std::string text = raw;
    size_t start = 0;
    while (start <= text.size()) {
      size_t comma = text.find(',', start);
      if (comma == std::string::npos) comma = text.size();
      std::string name = Trim(text.substr(start, comma - start));
      start = comma + 1;
      if (name.empty()) continue;
      int index = 0;
      if (name.size() >= 2 && name.size() <= 3 && (name[0] == 'B' || name[0] == 'b') &&
          name.find_first_not_of("0123456789", 1) == std::string::npos && name[1] != '0') {
        index = std::atoi(name.c_str() + 1);
        if (index > kBugCount) index = 0;
      }
      if (index == 0) {
        unknown += unknown.empty() ? name : ", " + name;
      } else {
        on[index] = true;
      }
    }
    if (!unknown.empty()) {
      std::fprintf(stderr, "racefuzz testbed: ignoring unknown RACEFUZZ_TESTBED_BUGS entries: %s\n",
                   unknown.c_str());
    }
  }
};

const Switches& TheSwitches() {
  static const Switches switches;
  return switches;
}

// Forces the parse (and its stderr line) at load, not at the first query.
[[maybe_unused]] const Switches& g_parsed_at_load = TheSwitches();

struct FaultSwitch {
  Fault fault = Fault::kNone;
  std::string backend;

  FaultSwitch() {
    const char* raw = std::getenv("RACEFUZZ_TESTBED_FAULT");
    if (raw == nullptr || *raw == '\0') return;
    std::string text = raw;
    size_t colon = text.find(':');
    std::string kind = text.substr(0, colon);
    backend = colon == std::string::npos ? "" : text.substr(colon + 1);
    if (kind == "hang") {
      fault = Fault::kHang;
    } else if (kind == "segv") {
      fault = Fault::kSegv;
    } else if (kind == "leak") {
      fault = Fault::kLeak;
    } else {
      std::fprintf(stderr, "racefuzz testbed: ignoring RACEFUZZ_TESTBED_FAULT=%s\n", raw);
    }
  }
};

const FaultSwitch& TheFault() {
  static const FaultSwitch fault;
  return fault;
}

}  // namespace

Fault FaultFor(const char* backend_name) {
  const FaultSwitch& f = TheFault();
  if (f.fault == Fault::kNone) return Fault::kNone;
  return f.backend.empty() || f.backend == backend_name ? f.fault : Fault::kNone;
}

bool Enabled(Bug bug) { return TheSwitches().on[static_cast<int>(bug)]; }

std::string EnabledList() {
  std::string out;
  for (int i = 1; i <= kBugCount; ++i) {
    if (TheSwitches().on[i]) out += (out.empty() ? "B" : ",B") + std::to_string(i);
  }
  return out;
}

}  // namespace testbed
