#include "checkpoint/internal/host_buffer.h"

#include <cstdlib>
#include <new>
#include <utility>

#ifdef STRATA_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace strata::checkpoint::internal {

HostBuffer::~HostBuffer() { Release(); }

HostBuffer::HostBuffer(HostBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      pinned_(std::exchange(other.pinned_, false)) {}

HostBuffer& HostBuffer::operator=(HostBuffer&& other) noexcept {
  if (this != &other) {
    Release();
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    pinned_ = std::exchange(other.pinned_, false);
  }
  return *this;
}

void HostBuffer::Release() {
  if (data_ == nullptr) return;
#ifdef STRATA_HAVE_CUDA
  if (pinned_) {
    cudaFreeHost(data_);
    data_ = nullptr;
    return;
  }
#endif
  std::free(data_);
  data_ = nullptr;
}

void HostBuffer::Resize(size_t bytes) {
  if (bytes == size_ && data_ != nullptr) return;
  Release();
  size_ = bytes;
  pinned_ = false;
  if (bytes == 0) return;
#ifdef STRATA_HAVE_CUDA
  void* p = nullptr;
  if (cudaHostAlloc(&p, bytes, cudaHostAllocDefault) == cudaSuccess) {
    data_ = static_cast<char*>(p);
    pinned_ = true;
    return;
  }
  (void)cudaGetLastError();  // clear the sticky error; fall back below
#endif
  // Page-aligned, so the file storage writes a staged chunk without a copy
  // (direct_writer.h).
  data_ = static_cast<char*>(std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096));
  if (data_ == nullptr) throw std::bad_alloc();
}

}  // namespace strata::checkpoint::internal
