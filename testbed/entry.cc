// The library's two exported entry points, and nothing else.
#include "factory.h"
#include "status.h"

#if defined(_WIN32)
#define TESTBED_EXPORT __declspec(dllexport)
#else
#define TESTBED_EXPORT __attribute__((visibility("default")))
#endif

extern "C" {

TESTBED_EXPORT OrtStatus* CreateEpFactories(const char* /*registered_name*/, const OrtApiBase* ort_api_base,
                                            const OrtLogger* default_logger, OrtEpFactory** factories,
                                            size_t max_factories, size_t* num_factories) {
  *num_factories = 0;
  // Built against API 29; newer ORT releases keep serving older API versions.
  const OrtApi* api = ort_api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) return nullptr;  // no API to report an error with: register nothing
  testbed::g_ort_api = api;
  testbed::g_ep_api = api->GetEpApi();
  if (max_factories < 1) {
    return testbed::Error("RacefuzzTestbed needs room for one factory.", ORT_INVALID_ARGUMENT);
  }
  testbed::PinThisLibrary();
  OrtStatus* status = nullptr;
  testbed::TestbedFactory* factory = testbed::TestbedFactory::Create(default_logger, &status);
  if (factory == nullptr) return status;
  factories[0] = factory;
  *num_factories = 1;
  return nullptr;
}

TESTBED_EXPORT OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
  // Drops ORT's reference only: sessions, allocators and device values still using the factory
  // keep it alive until the last of them is gone.
  static_cast<testbed::TestbedFactory*>(factory)->Unref();
  return nullptr;
}

}  // extern "C"
