// Status helpers shared by every testbed source file.
//
// Every callback ORT calls is noexcept and reports failure as an OrtStatus*; these helpers keep
// that convention short: build a one-sentence status, propagate one, and turn any C++ exception
// into a status at the ABI boundary so that none crosses into ORT.
#pragma once

#include <exception>
#include <string>

#include "onnxruntime_c_api.h"

namespace testbed {

// Set once by CreateEpFactories. ORT's API tables live as long as the process does.
inline const OrtApi* g_ort_api = nullptr;
inline const OrtEpApi* g_ep_api = nullptr;

inline const OrtApi& Api() { return *g_ort_api; }
inline const OrtEpApi& EpApi() { return *g_ep_api; }

// The EP name as ORT shows it; also the prefix of our own error messages.
inline constexpr const char* kEpName = "RacefuzzTestbed";

// ORT_FAIL, not ORT_EP_FAIL: Python's InferenceSession.run answers an EPFail by silently
// recreating the session on the CPU EP and retrying, which would hide every symptom.
inline OrtStatus* Error(const std::string& message, OrtErrorCode code = ORT_FAIL) {
  return Api().CreateStatus(code, message.c_str());
}

// Reads and releases a status: used where an error can only be logged or ignored.
inline std::string TakeMessage(OrtStatus* status) {
  if (status == nullptr) return {};
  std::string message = Api().GetErrorMessage(status);
  Api().ReleaseStatus(status);
  return message;
}

}  // namespace testbed

#define RETURN_IF_ERROR(expr)             \
  do {                                    \
    OrtStatus* _testbed_status = (expr);  \
    if (_testbed_status != nullptr) {     \
      return _testbed_status;             \
    }                                     \
  } while (0)

#define RETURN_ERROR_IF(condition, message) \
  do {                                      \
    if (condition) {                        \
      return ::testbed::Error(message);     \
    }                                       \
  } while (0)

// Wrap the body of a callback that returns OrtStatus*: no exception may reach ORT.
#define TESTBED_API_BEGIN try {
#define TESTBED_API_END                                                                 \
  }                                                                                     \
  catch (const std::exception& ex) {                                                    \
    return ::testbed::Error(std::string("RacefuzzTestbed internal error: ") + ex.what()); \
  }                                                                                     \
  catch (...) {                                                                         \
    return ::testbed::Error("RacefuzzTestbed internal error.");                         \
  }
