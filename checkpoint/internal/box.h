// N-dimensional boxes in row-major tensors (internal): intersection, copying
// the common part between two buffers and its byte runs — the core of
// resharding on load (checkpoint/reader.cc).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace strata::checkpoint::internal {

struct Box {
  std::vector<int64_t> offset;  // global coordinates of the first element
  std::vector<int64_t> shape;
  int64_t NumElements() const;
};

// The common part of two boxes, or nullopt if it is empty or the boxes have
// different numbers of dimensions.
std::optional<Box> Intersect(const Box& a, const Box& b);

// Copies the elements of `region` (inside both boxes) from `src`, a dense
// row-major buffer holding box `src_box`, to `dst`, one holding `dst_box`.
void CopyRegion(const Box& region, const Box& src_box, const void* src,
                const Box& dst_box, void* dst, size_t elem_size);

// Byte ranges [begin, end) of `region` inside a dense buffer holding `box`:
// one range per contiguous run (the innermost dims that cover the box's
// full width merge into one run).
std::vector<std::pair<uint64_t, uint64_t>> RegionByteRuns(const Box& region,
                                                          const Box& box,
                                                          size_t elem_size);

}  // namespace strata::checkpoint::internal
