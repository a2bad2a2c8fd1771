// A staging buffer for Checkpointer::SaveAsync (internal; docs/checkpoint.md:
// "reusable host staging buffers (pinned when CUDA)"). Built with CUDA, memory
// comes from cudaHostAlloc, so a device-to-host copy into it runs at full PCIe/
// NVLink-C2C speed and can be asynchronous; when the CUDA runtime cannot
// pin (no driver, no GPU, as on the dev machines) it falls back to ordinary
// pages, which is all a CPU tensor needs. Not copyable; movable.
#pragma once

#include <cstddef>

namespace strata::checkpoint::internal {

class HostBuffer {
 public:
  HostBuffer() = default;
  ~HostBuffer();
  HostBuffer(HostBuffer&& other) noexcept;
  HostBuffer& operator=(HostBuffer&& other) noexcept;
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;

  // Contents are not preserved when the size changes.
  void Resize(size_t bytes);
  char* data() { return data_; }
  size_t size() const { return size_; }
  bool pinned() const { return pinned_; }

 private:
  void Release();
  char* data_ = nullptr;
  size_t size_ = 0;
  bool pinned_ = false;
};

}  // namespace strata::checkpoint::internal
