#include "checkpoint/internal/box.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>

namespace strata::checkpoint::internal {
namespace {

// Row-major strides (in elements) of a dense buffer of `shape`.
std::vector<int64_t> Strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (int i = static_cast<int>(shape.size()) - 2; i >= 0; --i)
    s[i] = s[i + 1] * shape[i + 1];
  return s;
}

int64_t LinearIndex(const std::vector<int64_t>& global, const Box& box,
                    const std::vector<int64_t>& strides) {
  int64_t idx = 0;
  for (size_t d = 0; d < global.size(); ++d)
    idx += (global[d] - box.offset[d]) * strides[d];
  return idx;
}

// Visits every run of `region` that is contiguous in each of `boxes`:
// calls fn(first_global_coordinate, run_elements).
template <typename Fn>
void ForEachRun(const Box& region, std::initializer_list<const Box*> boxes,
                Fn&& fn) {
  const size_t nd = region.shape.size();
  if (region.NumElements() == 0) return;
  if (nd == 0) {
    fn(std::vector<int64_t>{}, 1);
    return;
  }
  // Merge trailing dims where the region spans the box's full extent.
  size_t inner = nd - 1;
  int64_t run = region.shape[nd - 1];
  auto full = [&](size_t d) {
    for (const Box* b : boxes) {
      if (region.shape[d] != b->shape[d]) return false;
    }
    return true;
  };
  while (inner > 0 && full(inner)) {
    --inner;
    run *= region.shape[inner];
  }
  std::vector<int64_t> pos(region.offset.begin(), region.offset.end());
  for (;;) {
    fn(pos, run);
    // Advance the odometer over dims [0, inner).
    int d = static_cast<int>(inner) - 1;
    for (; d >= 0; --d) {
      if (++pos[d] < region.offset[d] + region.shape[d]) break;
      pos[d] = region.offset[d];
    }
    if (d < 0) return;
  }
}

}  // namespace

int64_t Box::NumElements() const {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return n;
}

std::optional<Box> Intersect(const Box& a, const Box& b) {
  if (a.offset.size() != b.offset.size()) return std::nullopt;
  Box out;
  for (size_t d = 0; d < a.offset.size(); ++d) {
    const int64_t lo = std::max(a.offset[d], b.offset[d]);
    const int64_t hi =
        std::min(a.offset[d] + a.shape[d], b.offset[d] + b.shape[d]);
    if (hi <= lo) return std::nullopt;
    out.offset.push_back(lo);
    out.shape.push_back(hi - lo);
  }
  return out;
}

void CopyRegion(const Box& region, const Box& src_box, const void* src,
                const Box& dst_box, void* dst, size_t elem_size) {
  const auto ss = Strides(src_box.shape), ds = Strides(dst_box.shape);
  ForEachRun(region, {&src_box, &dst_box},
             [&](const std::vector<int64_t>& pos, int64_t n) {
               std::memcpy(static_cast<char*>(dst) +
                               LinearIndex(pos, dst_box, ds) * elem_size,
                           static_cast<const char*>(src) +
                               LinearIndex(pos, src_box, ss) * elem_size,
                           static_cast<size_t>(n) * elem_size);
             });
}

std::vector<std::pair<uint64_t, uint64_t>> RegionByteRuns(const Box& region,
                                                          const Box& box,
                                                          size_t elem_size) {
  const auto strides = Strides(box.shape);
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  ForEachRun(region, {&box}, [&](const std::vector<int64_t>& pos, int64_t n) {
    const uint64_t b =
        static_cast<uint64_t>(LinearIndex(pos, box, strides)) * elem_size;
    const uint64_t e = b + static_cast<uint64_t>(n) * elem_size;
    if (!runs.empty() && runs.back().second == b) {
      runs.back().second = e;
    } else {
      runs.emplace_back(b, e);
    }
  });
  return runs;
}

}  // namespace strata::checkpoint::internal
