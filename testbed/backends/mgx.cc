#include "mgx.h"

#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "../bugs.h"
#include "../status.h"
#include "../stream.h"

namespace testbed {
namespace {

// hipErrorInvalidValue, as hipMemcpy reports an address it did not allocate.
constexpr const char* kInvalidArgument = "HIP failure 1: invalid argument";

// Simulated time for the device to pick up queued work: long enough that a read which is not
// ordered after it (B7) reliably sees the buffer before the work lands.
constexpr std::chrono::milliseconds kDeviceLatency{3};

// Time before a queued host-to-device copy or fill lands: the window in which work that is not
// ordered after it (B11, B12) still sees the old bytes.
constexpr std::chrono::milliseconds kCopyLatency{2};

constexpr size_t kAlignment = 256;

}  // namespace

Backend& MgxBackend() {
  static Mgx* backend = new Mgx();  // never destroyed: device values may outlive everything else
  return *backend;
}

Mgx::Block::Block(size_t bytes) : raw(new uint8_t[bytes + kAlignment]()), size(bytes) {
  auto address = reinterpret_cast<uintptr_t>(raw.get());
  data = raw.get() + (kAlignment - address % kAlignment) % kAlignment;
}

std::shared_ptr<Mgx::Block> Mgx::Find(const void* p, size_t bytes) const {
  auto address = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.upper_bound(address);
  if (it == blocks_.begin()) return nullptr;
  --it;
  const Block& block = *it->second;
  // A zero-byte query still has to point inside the block.
  if (address + (bytes == 0 ? 1 : bytes) > it->first + block.size) return nullptr;
  return it->second;
}

bool Mgx::Owns(const void* p) const { return Find(p, 0) != nullptr; }

void* Mgx::Alloc(size_t bytes, std::string& /*error*/) {
  // A zero-byte request still gets a distinct address, as hipMalloc's does.
  auto block = std::make_shared<Block>(bytes == 0 ? 1 : bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_[reinterpret_cast<uintptr_t>(block->data)] = block;
  return block->data;
}

void Mgx::Free(void* p) {
  std::lock_guard<std::mutex> lock(mutex_);
  blocks_.erase(reinterpret_cast<uintptr_t>(p));
}

bool Mgx::Drop(void* p) {
#if defined(__SANITIZE_ADDRESS__)
  // Freed with the address still registered: a copy or launch then reads freed memory, which
  // AddressSanitizer reports at its first touch.
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = blocks_.find(reinterpret_cast<uintptr_t>(p));
  if (it == blocks_.end() || it->second->raw == nullptr) return true;
  it->second->raw.reset();
  return true;
#else
  // Without ASan a write into freed host memory would corrupt the heap and crash somewhere
  // unrelated later, where one defect would look like many: the device's fault stands for it.
  (void)p;
  return false;
#endif
}

OrtStatus* Mgx::Copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes,
                     WorkQueue* queue) {
  std::shared_ptr<Block> dst_block, src_block;
  if (dst_on_device && (dst_block = Find(dst, bytes)) == nullptr) return Error(kInvalidArgument);
  if (src_on_device && (src_block = Find(src, bytes)) == nullptr) return Error(kInvalidArgument);
  if (queue != nullptr && dst_on_device) {
    // Asynchronous on the stream: host bytes are snapshot now, so the caller may reuse them.
    std::shared_ptr<std::vector<uint8_t>> staged;
    if (!src_on_device) {
      const auto* from = static_cast<const uint8_t*>(src);
      staged = std::make_shared<std::vector<uint8_t>>(from, from + bytes);
      src = staged->data();
    }
    const auto due = std::chrono::steady_clock::now() + kCopyLatency;
    queue->Enqueue([dst, src, bytes, dst_block, src_block, staged, due] {
      std::this_thread::sleep_until(due);
      if (bytes > 0) std::memcpy(dst, src, bytes);
    });
    return nullptr;
  }
  if (queue == nullptr || Enabled(Bug::kNoComputeSync)) {
    // B7 (the sibling of #86): the D2H copy is not ordered on the session stream, so it reads the
    // buffer before the queued compute has written it.
    if (bytes > 0) std::memcpy(dst, src, bytes);
    return nullptr;
  }
  // Device to host, ordered on the stream: runs after the work queued before it, and the caller
  // waits for it (hipMemcpyAsync into pageable memory blocks the host).
  queue->Enqueue([dst, src, bytes, dst_block, src_block] {
    if (bytes > 0) std::memcpy(dst, src, bytes);
  });
  queue->Drain();
  return nullptr;
}

void Mgx::ZeroFillOnQueue(void* p, size_t bytes, WorkQueue* queue) {
  std::shared_ptr<Block> block = Find(p, bytes);
  if (block == nullptr || queue == nullptr) return;
  const auto due = std::chrono::steady_clock::now() + kCopyLatency;
  queue->Enqueue([p, bytes, block, due] {
    std::this_thread::sleep_until(due);
    if (bytes > 0) std::memset(p, 0, bytes);
  });
}

OrtStatus* Mgx::Launch(const std::shared_ptr<const Program>& program, const std::vector<DeviceTensor>& inputs,
                       const std::vector<DeviceTensor>& outputs, WorkQueue* queue) {
  std::vector<std::shared_ptr<Block>> keep;
  std::vector<ConstView> in;
  std::vector<MutableView> out;
  for (const DeviceTensor& t : inputs) {
    auto block = Find(t.data, static_cast<size_t>(ElementCount(t.shape)) * sizeof(float));
    if (block == nullptr) return Error(kInvalidArgument);
    in.push_back({static_cast<const float*>(t.data), t.shape});
    keep.push_back(std::move(block));
  }
  for (const DeviceTensor& t : outputs) {
    auto block = Find(t.data, static_cast<size_t>(ElementCount(t.shape)) * sizeof(float));
    if (block == nullptr) return Error(kInvalidArgument);
    out.push_back({static_cast<float*>(const_cast<void*>(t.data)), t.shape});
    keep.push_back(std::move(block));
  }
  if (queue == nullptr) {
    Execute(*program, in, out);
    return nullptr;
  }
  queue->Enqueue([program, in, out, keep] {
    std::this_thread::sleep_for(kDeviceLatency);
    Execute(*program, in, out);
  });
  return nullptr;
}

}  // namespace testbed
