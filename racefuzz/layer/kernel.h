// The layer's KernelRegistry_AddKernel (kernel.cc), which api_table.cc puts in the EP's table.
#pragma once

#include "proxies.h"

namespace rflayer {

OrtStatus* ORT_API_CALL AddKernel(OrtKernelRegistry* registry, const OrtKernelDef* def,
                                  OrtKernelCreateFunc create, void* state) noexcept;

// Checks each device input of a kernel context against `owner` (compute.cc).
void CheckInputs(OrtKernelContext* context, const Owner& owner, const char* call);

}  // namespace rflayer
