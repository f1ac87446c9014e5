// Findings of the layer: one JSON line each, appended to the file named by
// RACEFUZZ_LAYER_REPORT (read at every report: racefuzz sets it per run), else stderr.
#pragma once

#include <string>

namespace rflayer {

// `check`: misroute | shared-object | double-free | foreign-free | use-after-free |
// use-after-release | alive-at-release. `call`: the ABI call that broke it. `message`: one sentence naming both
// owners, with no addresses (racefuzz clusters on it).
void Report(const std::string& check, const std::string& call, const std::string& message);

std::string JsonString(const std::string& text);

}  // namespace rflayer
