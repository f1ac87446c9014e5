// The MIGraphX/HIP-like backend: device memory is host blocks registered like hipMalloc.
//
// Any address inside a live block is valid device memory for this backend, and nothing else is:
// a copy or launch touching an unregistered address fails with the HIP error of the seed's
// shared/hip/data_transfer.cc:73. Work issued with a session stream queue runs there, on the
// stream's worker thread, after a small simulated device latency; work issued without one runs
// inline (the creating thread's synchronous default stream). A host-to-device copy or a zero fill
// on a stream returns at once and lands after a small latency (the host bytes are snapshot first,
// as for pageable memory); a device-to-host copy on a stream waits for it. Blocks are reference counted, so a
// block freed while queued work still uses it stays alive until that work is done, as hipFree
// would wait for the device.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>

#include "backend.h"

namespace testbed {

class Mgx final : public Backend {
 public:
  Mgx() : Backend("mgx") {}

  bool Owns(const void* p) const override;
  void* Alloc(size_t bytes, std::string& error) override;
  void Free(void* p) override;
  bool Drop(void* p) override;
  OrtStatus* Copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes,
                  WorkQueue* queue) override;
  OrtStatus* Launch(const std::shared_ptr<const Program>& program, const std::vector<DeviceTensor>& inputs,
                    const std::vector<DeviceTensor>& outputs, WorkQueue* queue) override;
  bool HasEpAllocatorHook() const override { return false; }
  void ZeroFillOnQueue(void* p, size_t bytes, WorkQueue* queue) override;

 private:
  struct Block {
    explicit Block(size_t size);
    std::unique_ptr<uint8_t[]> raw;
    uint8_t* data;  // raw, aligned to 256 bytes like hipMalloc
    size_t size;
  };

  // The live block holding [p, p + bytes), else null.
  std::shared_ptr<Block> Find(const void* p, size_t bytes) const;

  mutable std::mutex mutex_;
  std::map<uintptr_t, std::shared_ptr<Block>> blocks_;  // keyed by aligned start address
};

}  // namespace testbed
