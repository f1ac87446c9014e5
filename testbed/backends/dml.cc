#include "dml.h"

#include <cstring>

#include "../status.h"

namespace testbed {
namespace {

// E_INVALIDARG as DirectML reports a buffer it does not know.
constexpr const char* kInvalidHandle = "DML failure: 0x80070057 invalid allocation handle";

}  // namespace

Backend& DmlBackend() {
  static Dml* backend = new Dml();  // never destroyed: device values may outlive everything else
  return *backend;
}

std::shared_ptr<Dml::Storage> Dml::Lookup(const void* handle, size_t bytes) const {
  auto value = reinterpret_cast<uintptr_t>(handle);
  if (value < kBase || (value - kBase) % kStride != 0) return nullptr;
  size_t index = (value - kBase) / kStride;
  std::lock_guard<std::mutex> lock(mutex_);
  if (index >= table_.size() || table_[index] == nullptr || table_[index]->size() < bytes) return nullptr;
  return table_[index];
}

bool Dml::Owns(const void* p) const { return Lookup(p, 0) != nullptr; }

void* Dml::Alloc(size_t bytes, std::string& error) {
  auto storage = std::make_shared<Storage>(bytes, 0);
  std::lock_guard<std::mutex> lock(mutex_);
  size_t index;
  if (!free_indices_.empty()) {
    index = free_indices_.back();
    free_indices_.pop_back();
  } else if (table_.size() < kMaxHandles) {
    index = table_.size();
    table_.emplace_back();
  } else {
    error = "DML failure: 0x8007000E out of allocation handles";
    return nullptr;
  }
  table_[index] = std::move(storage);
  return reinterpret_cast<void*>(kBase + index * kStride);
}

void Dml::Free(void* p) {
  if (Lookup(p, 0) == nullptr) return;
  size_t index = (reinterpret_cast<uintptr_t>(p) - kBase) / kStride;
  std::lock_guard<std::mutex> lock(mutex_);
  if (table_[index] == nullptr) return;  // freed concurrently
  table_[index] = nullptr;
  free_indices_.push_back(index);
}

OrtStatus* Dml::Copy(void* dst, bool dst_on_device, const void* src, bool src_on_device, size_t bytes,
                     WorkQueue* /*queue: DirectML copies are synchronous here*/) {
  std::shared_ptr<Storage> dst_storage, src_storage;
  if (dst_on_device && (dst_storage = Lookup(dst, bytes)) == nullptr) return Error(kInvalidHandle);
  if (src_on_device && (src_storage = Lookup(src, bytes)) == nullptr) return Error(kInvalidHandle);
  void* to = dst_on_device ? dst_storage->data() : dst;
  const void* from = src_on_device ? src_storage->data() : src;
  if (bytes > 0) std::memcpy(to, from, bytes);
  return nullptr;
}

OrtStatus* Dml::Launch(const std::shared_ptr<const Program>& program, const std::vector<DeviceTensor>& inputs,
                       const std::vector<DeviceTensor>& outputs, WorkQueue* /*queue*/) {
  std::vector<std::shared_ptr<Storage>> keep;
  std::vector<ConstView> in;
  std::vector<MutableView> out;
  for (const DeviceTensor& t : inputs) {
    auto storage = Lookup(t.data, static_cast<size_t>(ElementCount(t.shape)) * sizeof(float));
    if (storage == nullptr) return Error(kInvalidHandle);
    in.push_back({reinterpret_cast<const float*>(storage->data()), t.shape});
    keep.push_back(std::move(storage));
  }
  for (const DeviceTensor& t : outputs) {
    auto storage = Lookup(t.data, static_cast<size_t>(ElementCount(t.shape)) * sizeof(float));
    if (storage == nullptr) return Error(kInvalidHandle);
    out.push_back({reinterpret_cast<float*>(storage->data()), t.shape});
    keep.push_back(std::move(storage));
  }
  Execute(*program, in, out);
  return nullptr;
}

}  // namespace testbed
