// Stage 1 of a save (internal to the Checkpointer): what a rank writes of
// each shard, and the copy of it into reusable host staging buffers, cut
// into pieces that several threads can share (docs/checkpoint.md, "Saving").
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/internal/host_buffer.h"
#include "checkpoint/internal/save_state.h"
#include "checkpoint/tensor.h"

namespace strata::checkpoint::internal {

// Staging copies are cut into pieces of this size, so a thread reaching
// WaitSnapshot can share the rest of a copy under way (1 MiB: ~0.1 ms of
// memcpy, so the copier's piece in hand never holds the fence long).
inline constexpr size_t kCopyPieceBytes = 1 << 20;

// The part of a shard this replica writes: rows [k R/n, (k+1) R/n) of
// dimension 0 for replica k of n (a scalar: replica 0 only). `tensor`
// describes just those rows; its data points at the caller's memory until
// staged, then at a staging buffer.
struct Part {
  ShardedTensor tensor;
  bool has_chunk = true;  // false: this replica writes no rows
};

// A piece of a staging copy.
struct Copy {
  const char* src;
  char* dst;
  size_t len;
};

// One save's staged state. A Staged is reused by later saves: its buffers
// keep their pages (already faulted in), so later copies run at memcpy
// speed. Movable, not copyable.
struct Staged {
  int64_t step = 0;
  std::vector<Part> parts;
  std::map<std::string, HostBuffer> buffers;  // pinned when CUDA
  std::vector<Blob> blobs;
  std::vector<Copy> copies;  // still to copy into `buffers`
  std::shared_ptr<SaveState> handle;
};

// A staging copy in progress, shared by the threads that copy it: each
// takes the next piece through `next`; `left` counts pieces not yet copied.
struct CopyJob {
  const std::vector<Copy>* copies = nullptr;
  std::atomic<size_t> next{0};
  std::atomic<size_t> left{0};
};

// The part of `t` this replica writes (fully-parallel save: a tensor
// replicated over n data-parallel ranks costs each 1/n of a copy and of
// the writes). REQUIRES: t.Validate() is OK.
Part OwnPart(const ShardedTensor& t);

// Sizes the staging buffers of `s` for its parts (keyed by name and
// position: a rank may hold two shards of a tensor), points the parts at
// them and lists the copies still to make, in pieces of kCopyPieceBytes.
// The parts' data must stay valid and unchanged until the copies are made.
void PlanCopies(Staged& s);

// Copies pieces of `job` until none is left to take; safe to call from
// several threads at once (each piece is copied exactly once). Streams
// the stores (checkpoint/internal/stream_copy.h).
void RunCopies(CopyJob& job);

// Makes every copy of `s` on the calling thread.
void CopyAll(const Staged& s);

}  // namespace strata::checkpoint::internal
