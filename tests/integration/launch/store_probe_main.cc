// A rank command for launch_test: connects to STRATA_STORE, publishes
// "rank/<RANK>", waits (bounded, 60 s) for every rank's key and checks their
// values, counts arrivals with Add. Prints "store ok rank R of N arrivals A"
// and exits 0, or prints the failure and exits 1.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "comm/store.h"

using namespace strata;

int main() {
  const char* store_env = std::getenv("STRATA_STORE");
  const char* rank_env = std::getenv("RANK");
  const char* size_env = std::getenv("WORLD_SIZE");
  int rank = -1, size = -1, port = -1;
  if (!store_env || !rank_env || !size_env ||
      !absl::SimpleAtoi(rank_env, &rank) ||
      !absl::SimpleAtoi(size_env, &size)) {
    std::printf("store probe: STRATA_STORE, RANK or WORLD_SIZE missing\n");
    return 1;
  }
  // tcp://HOST:PORT
  std::string addr = store_env;
  const size_t colon = addr.rfind(':');
  if (addr.rfind("tcp://", 0) != 0 || colon == std::string::npos ||
      !absl::SimpleAtoi(addr.substr(colon + 1), &port)) {
    std::printf("store probe: bad STRATA_STORE '%s'\n", store_env);
    return 1;
  }
  auto store = comm::ConnectTcpStore(addr.substr(6, colon - 6), port,
                                     std::chrono::seconds(30));
  if (!store.ok()) {
    std::printf("store probe: %s\n", store.status().ToString().c_str());
    return 1;
  }
  const auto timeout = std::chrono::seconds(60);
  // Count first, then publish: once every key exists, every Add is done.
  auto arrivals = (*store)->Add("arrivals", 1);
  Status st = (*store)->Set("rank/" + std::to_string(rank),
                            "hello from " + std::to_string(rank));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back("rank/" + std::to_string(r));
  if (st.ok() && arrivals.ok()) st = (*store)->Wait(keys, timeout);
  if (!st.ok() || !arrivals.ok()) {
    std::printf("store probe: rank %d: %s\n", rank,
                (st.ok() ? arrivals.status() : st).ToString().c_str());
    return 1;
  }
  for (int r = 0; r < size; ++r) {
    auto v = (*store)->Get(keys[r], timeout);
    if (!v.ok() || *v != "hello from " + std::to_string(r)) {
      std::printf("store probe: rank %d: bad value for %s\n", rank,
                  keys[r].c_str());
      return 1;
    }
  }
  // Everyone has published; count the final arrivals once all are in.
  auto total = (*store)->Add("arrivals", 0);
  std::printf("store ok rank %d of %d arrivals %lld\n", rank, size,
              static_cast<long long>(total.ok() ? *total : -1));
  return 0;
}
