// One registration of the layer: the real library it stands for and how to read its backends.
#pragma once

#include <string>
#include <vector>

#include "onnxruntime_c_api.h"

namespace rflayer {

using CreateFn = OrtStatus* (*)(const char*, const OrtApiBase*, const OrtLogger*, OrtEpFactory**,
                                size_t, size_t*);
using ReleaseFn = OrtStatus* (*)(OrtEpFactory*);

struct Registration {
  std::string name;
  std::string library;
  // The provider option whose value names an EP instance's backend ("" : the EP's name).
  std::string backend_option;
  void* handle = nullptr;
  ReleaseFn release = nullptr;
  std::vector<OrtEpFactory*> proxies;  // live proxy factories of this registration
};

// The OrtApiBase the real library gets: ORT's, with the layer's copies of OrtApi and OrtEpApi.
const OrtApiBase* LayerApiBase(const OrtApiBase* ort_base);

}  // namespace rflayer
