#include "report.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "layer.h"

namespace rflayer {

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void Report(const std::string& check, const std::string& call, const std::string& message) {
  static std::mutex mu;
  std::string line = "{\"ev\":\"abi\",\"check\":" + JsonString(check) + ",\"call\":" +
                     JsonString(call) + ",\"message\":" + JsonString(message) +
                     ",\"thread\":" + std::to_string(ThreadId()) + "}\n";
  std::lock_guard<std::mutex> lock(mu);
  const char* path = std::getenv("RACEFUZZ_LAYER_REPORT");
  int fd = path != nullptr && *path != '\0' ? open(path, O_WRONLY | O_APPEND | O_CREAT, 0644) : 2;
  if (fd < 0) return;
  // One write per line, O_APPEND: lines of several threads never interleave.
  ssize_t ignored = write(fd, line.data(), line.size());
  (void)ignored;
  if (fd != 2) close(fd);
}

}  // namespace rflayer
