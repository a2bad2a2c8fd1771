// Example: data-parallel gradient all-reduce overlapped with backward.
//
// Each rank (a forked process; ranks meet through a file store and talk
// over shared memory) runs a fake backward pass layer by layer. As soon as
// a layer's gradient bucket is ready it starts an asynchronous all-reduce
// (AVG) and goes on computing the next layer; it waits for all of them only
// before the optimizer step — the PyTorch DDP / Megatron
// --overlap-grad-reduce pattern. The same step without overlap is timed for
// comparison, and the averaged gradients are checked.
//
//   strata-example-dp-overlap [RANKS] [LAYERS] [BUCKET_FLOATS]
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "comm/process_group.h"
#include "comm/shm/shm_transport.h"

using namespace strata::comm;

namespace {

// Stand-in for a layer's backward: a few passes of multiply-adds over the
// bucket so compute time scales with its size.
void Backward(std::vector<float>& grad, int rank, int layer) {
  for (size_t i = 0; i < grad.size(); ++i)
    grad[i] = static_cast<float>(rank + layer);
  for (int pass = 0; pass < 24; ++pass) {
    for (size_t i = 0; i < grad.size(); ++i)
      grad[i] = grad[i] * 0.999f + 0.001f * (rank + layer);
  }
}

double RunStep(ProcessGroup& g, std::vector<std::vector<float>>& grads,
               bool overlap) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::shared_ptr<Work>> pending;
  for (int layer = static_cast<int>(grads.size()) - 1; layer >= 0; --layer) {
    Backward(grads[layer], g.rank(), layer);
    if (overlap) {
      pending.push_back(g.AllReduce(grads[layer].data(), grads[layer].size(),
                                    DataType::kF32, ReduceOp::kAvg));
    }
  }
  if (!overlap) {
    for (auto& grad : grads) {
      pending.push_back(g.AllReduce(grad.data(), grad.size(), DataType::kF32,
                                    ReduceOp::kAvg));
    }
  }
  for (auto& w : pending) {
    strata::Status st = w->Wait();
    if (!st.ok()) {
      std::fprintf(stderr, "rank %d: %s\n", g.rank(), st.ToString().c_str());
      std::exit(1);
    }
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
      .count();
}

int RunRank(const char* dir, int rank, int size, int layers, size_t bucket) {
  auto store = NewFileStore(dir);
  auto t = ConnectShmTransport(*store, rank, size, ShmOptions{});
  if (!t.ok()) {
    std::fprintf(stderr, "rank %d: %s\n", rank, t.status().ToString().c_str());
    return 1;
  }
  ProcessGroup g(std::move(*t), GroupOptions{});
  std::vector<std::vector<float>> grads(layers, std::vector<float>(bucket));
  double plain = 1e9, overlapped = 1e9;
  for (int step = 0; step < 5; ++step) {  // best of 5
    plain = std::min(plain, RunStep(g, grads, false));
    overlapped = std::min(overlapped, RunStep(g, grads, true));
  }
  // Check: every element is the average of the ranks' identical recipe.
  for (int layer = 0; layer < layers; ++layer) {
    double want = 0;
    for (int r = 0; r < size; ++r) {
      float v = static_cast<float>(r + layer);
      for (int pass = 0; pass < 24; ++pass)
        v = v * 0.999f + 0.001f * (r + layer);
      want += v;
    }
    want /= size;
    if (std::fabs(grads[layer][bucket / 2] - want) >
        1e-4 * std::fabs(want) + 1e-6) {
      std::fprintf(stderr, "rank %d: layer %d averaged to %f, want %f\n", rank,
                   layer, grads[layer][bucket / 2], want);
      return 1;
    }
  }
  if (rank == 0) {
    std::printf(
        "%d ranks, %d layers x %zu floats: step %.1f ms without overlap, %.1f "
        "ms "
        "with overlap (%.2fx)\n",
        size, layers, bucket, plain * 1e3, overlapped * 1e3,
        plain / overlapped);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const int size = argc > 1 ? std::atoi(argv[1]) : 2;
  const int layers = argc > 2 ? std::atoi(argv[2]) : 16;
  const size_t bucket =
      argc > 3 ? std::strtoull(argv[3], nullptr, 10) : (1u << 20);
  if (size < 1 || layers < 1 || bucket < 1) {
    std::fprintf(stderr,
                 "usage: %s [RANKS>=1] [LAYERS>=1] [BUCKET_FLOATS>=1]\n",
                 argv[0]);
    return 2;
  }
  char dir[] = "/tmp/strata-dp-XXXXXX";
  if (mkdtemp(dir) == nullptr) return 1;
  std::vector<pid_t> children;
  for (int r = 1; r < size; ++r) {
    pid_t pid = fork();
    if (pid == 0) _exit(RunRank(dir, r, size, layers, bucket));
    children.push_back(pid);
  }
  int rc = RunRank(dir, 0, size, layers, bucket);
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) rc = 1;
  }
  std::string cmd = std::string("rm -rf ") + dir;
  (void)!std::system(cmd.c_str());
  return rc;
}
