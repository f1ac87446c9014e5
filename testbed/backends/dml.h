// The DirectML-like backend: device memory is an opaque allocation handle.
//
// A handle is an index into a process-wide handle table, encoded as a small pointer value inside
// the first 64 KiB of the address space, which no supported OS ever maps: dereferencing one
// crashes, and only this backend can turn it back into storage. Copies and launches reject
// anything that is not one of its live handles with the DirectML error the seed's logs show.
// Everything runs synchronously on the calling thread (DirectML queues are not modelled).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend.h"

namespace testbed {

class Dml final : public Backend {
 public:
  Dml() : Backend("dml") {}

  bool Owns(const void* p) const override;
  void* Alloc(size_t bytes, std::string& error) override;
  void Free(void* p) override;
  OrtStatus* Copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes,
                  WorkQueue* queue) override;
  OrtStatus* Launch(const std::shared_ptr<const Program>& program, const std::vector<DeviceTensor>& inputs,
                    const std::vector<DeviceTensor>& outputs, WorkQueue* queue) override;
  bool HasEpAllocatorHook() const override { return true; }

 private:
  using Storage = std::vector<uint8_t>;

  // Handles are kBase + index * kStride, all below 0x10000.
  static constexpr uintptr_t kBase = 0x100;
  static constexpr uintptr_t kStride = 0x10;
  static constexpr size_t kMaxHandles = (0x10000 - kBase) / kStride;

  // The live storage behind `handle` when it holds at least `bytes`, else null.
  std::shared_ptr<Storage> Lookup(const void* handle, size_t bytes) const;

  mutable std::mutex mutex_;
  std::vector<std::shared_ptr<Storage>> table_;  // null entries are free
  std::vector<size_t> free_indices_;
};

}  // namespace testbed
