#include "trace.h"

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#if defined(_WIN32)
#include <windows.h>
#elif defined(__APPLE__)
#include <pthread.h>
#else
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace testbed {
namespace trace {
namespace {

struct Sink {
  std::mutex mutex;
  std::FILE* file = nullptr;

  Sink() {
    const char* path = std::getenv("RACEFUZZ_TESTBED_TRACE");
    if (path != nullptr && path[0] != '\0') {
      file = std::fopen(path, "a");
      if (file == nullptr) {
        std::fprintf(stderr, "racefuzz testbed: cannot open trace file '%s'; tracing is off\n", path);
      }
    }
  }

  void Write(const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    std::fputs(line.c_str(), file);
    std::fputc('\n', file);
    std::fflush(file);
  }
};

// Never destroyed: worker threads may still trace while the process exits.
Sink& TheSink() {
  static Sink* sink = new Sink();
  return *sink;
}

[[maybe_unused]] Sink& g_opened_at_load = TheSink();

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Session(int64_t session) { return session == 0 ? "null" : std::to_string(session); }

std::string Json(const Buffer& b) {
  std::string out = "{\"owner\":" + Quote(b.owner);
  if (b.device) out += ",\"kind\":\"device\"";
  return out + "}";
}

std::string JsonList(const std::vector<Buffer>& buffers) {
  std::string out = "[";
  for (size_t i = 0; i < buffers.size(); ++i) out += (i ? "," : "") + Json(buffers[i]);
  return out + "]";
}

std::string Tail(bool misroute) {
  return ",\"misroute\":" + std::string(misroute ? "true" : "false") +
         ",\"thread\":" + std::to_string(ThreadId()) + "}";
}

}  // namespace

bool On() { return TheSink().file != nullptr; }

uint64_t ThreadId() {
#if defined(_WIN32)
  return static_cast<uint64_t>(GetCurrentThreadId());
#elif defined(__APPLE__)
  uint64_t id = 0;
  pthread_threadid_np(nullptr, &id);
  return id;
#else
  return static_cast<uint64_t>(syscall(SYS_gettid));
#endif
}

void Alloc(const char* backend, int64_t session, const char* session_backend, size_t bytes, bool misroute) {
  if (!On()) return;
  // The new buffer is always owned by the backend that allocated it.
  TheSink().Write("{\"ev\":\"alloc\",\"backend\":" + Quote(backend) + ",\"session\":" + Session(session) +
                  ",\"session_backend\":" + (session_backend ? Quote(session_backend) : "null") +
                  ",\"owner\":" + Quote(backend) + ",\"bytes\":" + std::to_string(bytes) + Tail(misroute));
}

void Copy(const char* backend, int64_t session, const Buffer& src, const Buffer& dst, size_t bytes,
          bool misroute) {
  if (!On()) return;
  TheSink().Write("{\"ev\":\"copy\",\"backend\":" + Quote(backend) + ",\"session\":" + Session(session) +
                  ",\"src\":" + Json(src) + ",\"dst\":" + Json(dst) + ",\"bytes\":" + std::to_string(bytes) +
                  Tail(misroute));
}

void Compute(const char* backend, int64_t session, const std::vector<Buffer>& inputs,
             const std::vector<Buffer>& outputs, bool misroute) {
  if (!On()) return;
  TheSink().Write("{\"ev\":\"compute\",\"backend\":" + Quote(backend) + ",\"session\":" + Session(session) +
                  ",\"inputs\":" + JsonList(inputs) + ",\"outputs\":" + JsonList(outputs) + Tail(misroute));
}

}  // namespace trace
}  // namespace testbed
