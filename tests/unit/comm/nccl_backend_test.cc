// NCCL backend: runs only with CUDA GPUs; skips cleanly otherwise.
#include "comm/nccl/nccl_backend.h"

#include <cuda_runtime.h>

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace strata::comm {
namespace {

TEST(NcclBackendTest, AllReduceAcrossVisibleGpus) {
  const int gpus = CudaDeviceCount();
  if (gpus == 0)
    GTEST_SKIP() << "no CUDA device: NCCL backend tests need a GPU";
  const int n = std::min(gpus, 4);
  auto store = NewInMemoryStore();
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      cudaSetDevice(r);
      auto b = NewNcclBackend(store, r, n);
      ASSERT_TRUE(b.ok()) << b.status();
      const size_t count = (1 << 20) + 5;
      std::vector<float> host(count, static_cast<float>(r + 1));
      float* dev = nullptr;
      ASSERT_EQ(cudaMalloc(&dev, count * sizeof(float)), cudaSuccess);
      cudaMemcpy(dev, host.data(), count * sizeof(float),
                 cudaMemcpyHostToDevice);
      ASSERT_TRUE((*b)->AllReduce(dev, count, DataType::kF32, ReduceOp::kSum)
                      ->Wait()
                      .ok());
      cudaMemcpy(host.data(), dev, count * sizeof(float),
                 cudaMemcpyDeviceToHost);
      EXPECT_EQ(host[count - 1], n * (n + 1) / 2.0f);
      cudaFree(dev);
    });
  }
  for (auto& t : threads) t.join();
}

TEST(NcclBackendTest, WithoutGpuCreationFailsCleanly) {
  if (CudaDeviceCount() > 0) GTEST_SKIP() << "a GPU is present";
  auto b = NewNcclBackend(NewInMemoryStore(), 0, 1);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace strata::comm
