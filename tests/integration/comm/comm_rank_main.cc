// One rank of a multi-process comm test (tests/integration/comm/
// multiprocess_test.cc starts several). Exit codes: 0 ok, 1 wrong result,
// 2 setup failure, 3 collective error (message on stdout as "ERROR ...").
//   strata_comm_rank TRANSPORT STORE_DIR RANK SIZE MODE [TIMEOUT_MS] [NODES]
// TRANSPORT: shm | tcp | hybrid; MODE: verify | loop; NODES e.g. "0,0,1,1".
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "comm/backend_factory.h"

using namespace strata;
using namespace strata::comm;

namespace {

int Fail(const Status& st) {
  std::printf("ERROR %s\n", st.ToString().c_str());
  std::fflush(stdout);
  return 3;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(
        stderr,
        "usage: %s TRANSPORT STORE_DIR RANK SIZE MODE [TIMEOUT_MS] [NODES]\n",
        argv[0]);
    return 2;
  }
  const std::string kind = argv[1], dir = argv[2], mode = argv[5];
  int rank = 0, size = 0, timeout_ms = 20000;
  if (!absl::SimpleAtoi(argv[3], &rank) || !absl::SimpleAtoi(argv[4], &size) ||
      (argc > 6 && !absl::SimpleAtoi(argv[6], &timeout_ms))) {
    std::fprintf(stderr, "bad numbers\n");
    return 2;
  }
  std::vector<int> nodes(size, 0);
  if (argc > 7) {
    nodes.clear();
    for (auto s : absl::StrSplit(argv[7], ',')) {
      int v = 0;
      if (!absl::SimpleAtoi(s, &v)) return 2;
      nodes.push_back(v);
    }
  }
  auto store = NewFileStore(dir);
  if (!store.ok()) return 2;
  // Through the factory: "hybrid" picks transports from the node map;
  // "shm" and "tcp" use one transport for every pair.
  BackendOptions bo;
  bo.name = kind;
  bo.rank = rank;
  bo.node_of = nodes;
  bo.store = *store;
  bo.group.timeout = std::chrono::milliseconds(timeout_ms);
  StatusOr<std::unique_ptr<Backend>> backend = NewBackend(bo);
  if (!backend.ok()) {
    std::printf("SETUP %s\n", backend.status().ToString().c_str());
    return 2;
  }
  Backend& g = **backend;

  if (mode == "loop") {  // fault tests: all-reduce until something breaks
    std::vector<float> buf(1 << 20, 1.0f);
    std::printf("READY\n");
    std::fflush(stdout);
    for (int i = 0; i < 100000; ++i) {
      Status st =
          g.AllReduce(buf.data(), buf.size(), DataType::kF32, ReduceOp::kMax)
              ->Wait();
      if (!st.ok()) return Fail(st);
    }
    return 0;
  }
  // verify: every size and algorithm against the values each rank can
  // compute itself (sum of (r+1)*(i%7+1) over ranks).
  std::vector<Algorithm> algos = {Algorithm::kRing,
                                  Algorithm::kRecursiveDoubling};
  if (kind == "hybrid") algos.push_back(Algorithm::kHierarchical);
  if (kind == "shm") algos.push_back(Algorithm::kShared);
  for (size_t count :
       {size_t{0}, size_t{1}, size_t{7}, size_t{4099}, size_t{(1 << 20) + 5}}) {
    for (Algorithm a : algos) {
      std::vector<int64_t> buf(count);
      for (size_t i = 0; i < count; ++i)
        buf[i] = (rank + 1) * static_cast<int64_t>(i % 7 + 1);
      OpOptions o;
      o.algorithm = a;
      Status st =
          g.AllReduce(buf.data(), count, DataType::kI64, ReduceOp::kSum, o)
              ->Wait();
      if (!st.ok()) return Fail(st);
      const int64_t ranks_sum = static_cast<int64_t>(size) * (size + 1) / 2;
      for (size_t i = 0; i < count; ++i) {
        if (buf[i] != ranks_sum * static_cast<int64_t>(i % 7 + 1)) {
          std::printf("WRONG %s count %zu at %zu\n", AlgorithmName(a), count,
                      i);
          return 1;
        }
      }
    }
  }
  std::vector<float> f(1000, static_cast<float>(rank));
  if (!g.Broadcast(f.data(), f.size(), DataType::kF32, size - 1)->Wait().ok() ||
      f[999] != static_cast<float>(size - 1)) {
    std::printf("WRONG broadcast\n");
    return 1;
  }
  Status st = g.Barrier()->Wait();
  if (!st.ok()) return Fail(st);
  std::printf("OK\n");
  return 0;
}
