// Several virtual GPUs behind one factory, and which device's pool each block lives in.
//
// The factory reports kDeviceCount GPUs (device_id 0, 1, ...). Each backend's blocks are kept in
// one pool per device: the registry below records, for every block an allocator hands out, the
// device whose pool holds it and the session whose OrtEp allocator made it (0 for the
// environment's allocators). ORT labels a tensor with a device id from the allocator's Info; a
// copy or launch whose pointer lives in another device's pool fails as hipMemcpy does with a
// pointer of another device (hipErrorInvalidDevice), or, for dml, as an unknown handle.
//
// Kept apart from the copy and launch paths so that those only call the two checks.
#pragma once

#include <cstdint>
#include <vector>

#include "onnxruntime_c_api.h"

namespace testbed {

class Backend;
struct DeviceTensor;

namespace devices {

inline constexpr int kDeviceCount = 2;

// The device a session asked for by its OrtHardwareDevice really computes and allocates on. Fixed:
// the one asked for. B16 latches the first CreateEp's device for the whole process.
int Resolve(int requested);

// Which pool a block is in. `session` 0: an environment (factory) allocator's block.
struct Home {
  int device = -1;  // -1: not an allocator's block (never recorded, or already freed)
  int64_t session = 0;
  bool retired = false;  // B14: its environment allocator was replaced while it was alive
  bool written = false;  // B22: an environment upload has filled it before
  bool dropped = false;  // B23: freed with its session while ORT still holds it
};
void Record(const void* p, int device, int64_t session);
void Forget(const void* p);
Home Of(const void* p);
// Every block `session`'s OrtEp allocators handed out that is still alive (B23).
std::vector<void*> BlocksOf(int64_t session);
// B23: the block's memory is gone; a copy or launch touching it faults (illegal access).
void MarkDropped(const void* p);
// Marks a recorded block as filled by an environment upload; whether it had been before.
bool MarkWritten(const void* p);

// The environment's (shared) allocators of each device: ORT makes one per device at registration
// and another when an application replaces it (CreateSharedAllocator). `EnvAllocatorMade` says
// whether one of that device was alive already. Fixed: a replaced allocator's blocks stay valid
// until freed. B14, after onnxruntime#32164/#32272 (registering an allocator for a device removed
// the one made before it): the device's environment pool is reset for the newcomer, and every
// block the earlier allocator handed out and is still alive stops being device memory.
bool EnvAllocatorMade(int device);
void EnvAllocatorReleased(int device);
void RetireEnvBlocks(int device);

// A copy: each device operand must live in the pool of the device its OrtValue is labelled with.
OrtStatus* CheckCopy(const Backend& backend, const OrtValue* src, const void* src_data, bool src_on_device,
                     const OrtValue* dst, const void* dst_data, bool dst_on_device);

// A launch of `session` on `device`: every operand must live in that device's pool; under B15,
// inputs must also be the session's own or the environment's.
OrtStatus* CheckLaunch(const Backend& backend, int64_t session, int device, const std::vector<DeviceTensor>& inputs,
                       const std::vector<DeviceTensor>& outputs);

}  // namespace devices
}  // namespace testbed
