// Who owns what, process-wide: the layer's model of an EP library's objects.
//
// Every EP instance the layer sees created gets an id (1, 2, ... in CreateEp order) and a
// backend: the value of the provider option the target names (`backend_option`, e.g. the
// testbed's `profile`), else the EP's name. Every block an allocator hands out is tagged with
// that allocator's owner: an EP instance (OrtEp::CreateAllocator), or the factory (the
// environment's allocator). A factory block gets the backend of the EPs alive on its device
// when they are all one backend, else none.
//
// An object every session shares (the factory's allocator, the environment's DataTransfer) has
// no session to route by: once one library made EPs of two backends, it cannot know which
// backend a block belongs to (the seed's residual: both backends declare one memory device,
// CanCopy cannot tell them apart, and the process-wide slot that picks a backend is the whole
// library's, not one device's), and the layer says so whenever such an object handles device
// memory, or hands a session memory of its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace rflayer {

struct Owner {
  uint64_t ep = 0;      // 0: the factory (no session)
  std::string backend;  // "" when unknown
  std::string session;  // the schedule's name for the EP's session (scheduling points)
  std::string Describe() const;
};

struct Block {
  uintptr_t start = 0;
  size_t size = 0;
  uint64_t allocator = 0;  // the proxy allocator's id
  Owner owner;
  std::string scope;  // the real library whose allocator made it

  uint64_t alloc_thread = 0;
  uint64_t free_thread = 0;
  uint64_t freed_by = 0;  // allocator id that freed it
};

class Ownership {
 public:
  static Ownership& Get();

  uint64_t NewId();

  // An EP instance of `backend` was created on `device`; returns its id.
  uint64_t Created(const std::string& scope, const std::string& backend);
  void Released(uint64_t ep);
  // The backends of every EP created on `device` so far: an object shared by all sessions (the
  // factory's allocator, the environment's DataTransfer) may be serving any of them.
  std::set<std::string> BackendsEver(const std::string& scope);

  void Allocated(void* p, size_t size, uint64_t allocator, const Owner& owner,
                 const std::string& scope);
  // Checks a free through `allocator`; returns the problem ("" when fine) and forgets the block.
  std::string Freed(void* p, uint64_t allocator, const std::string& allocator_owner);

  // A per-session object (a DataTransfer, an EP's allocator) the real library handed out for
  // `owner`: the owner it was first handed out for when that is an EP of another backend (one
  // object serving two backends cannot route by owner), else none.
  std::optional<Owner> SharedWith(const void* real, const Owner& owner);
  // ORT released it: its address may come back as another object, which is no sharing.
  void Forget(const void* real);

  // The live block holding `p`, or the freed one that held it (then `*freed` is true).
  std::optional<Block> Find(const void* p, bool* freed);


 private:
  std::mutex mu_;
  uint64_t next_id_ = 1;
  std::map<uintptr_t, Block> live_;
  std::map<uintptr_t, Block> freed_;  // the most recent frees, bounded
  std::vector<uintptr_t> freed_order_;
  std::map<uint64_t, std::pair<std::string, std::string>> alive_;  // ep -> (scope, backend)
  std::map<std::string, std::set<std::string>> backends_;          // scope -> ever created
  std::map<const void*, Owner> handed_;  // real per-session object -> its first owner
  uint64_t next_ep_ = 1;

  std::optional<Block> FindIn(std::map<uintptr_t, Block>& blocks, uintptr_t p);
};

}  // namespace rflayer
