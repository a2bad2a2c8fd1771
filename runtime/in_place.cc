// In-place restart on the rank's side (runtime.h, docs/fault.md "In-place
// restart"): the generation watcher, the abort of the current groups, the
// re-formed rendezvous and groups, and the agreement on the step to go on
// from.
#include <stdlib.h>

#include <algorithm>
#include <limits>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "checkpoint/mem_wire.h"
#include "common/logging.h"
#include "runtime/rendezvous.h"
#include "runtime/runtime.h"

namespace strata {
namespace {

// Set by the coordinator in the attempt's namespace; a decimal generation.
constexpr char kGenerationKey[] = "inplace/generation";
// Set by the coordinator in generation g's namespace before it announces g,
// when g replaces a lost node (coordinator/jobs/job_inplace_node.cc): the
// ranks started on the spare ("1,3"), and the memory tier's replica
// endpoints in node order (the value of STRATA_MEM_PEERS from now on).
constexpr char kReplacedKey[] = "inplace/replaced";
constexpr char kMemPeersKey[] = "inplace/mem_peers";

}  // namespace

StatusOr<int> Runtime::ReadGeneration() {
  ASSIGN_OR_RETURN(bool present, attempt_store_->Check(kGenerationKey));
  if (!present) return info_.generation;
  ASSIGN_OR_RETURN(std::string v, attempt_store_->Get(kGenerationKey,
                                                      std::chrono::seconds(5)));
  int g = 0;
  if (!absl::SimpleAtoi(v, &g) || g < 0) {
    return absl::DataLossError(
        absl::StrCat("store key ", kGenerationKey, " is not a generation: '",
                     v.substr(0, 40), "'"));
  }
  return g;
}

Status Runtime::EnableInPlace() {
  if (in_place_) return absl::OkStatus();
  if (groups_ == nullptr) {
    return absl::FailedPreconditionError(
        "in-place restart needs strata's groups (Runtime built without "
        "groups): the program must restart fully");
  }
  if (bo_.name != "hybrid" && bo_.name != "shm" && bo_.name != "tcp") {
    return absl::FailedPreconditionError(absl::StrCat(
        "in-place restart needs a backend whose collectives can be aborted "
        "(hybrid, shm, tcp); ",
        bo_.name, " cannot, so this job gets a full restart"));
  }
  if (!info_.store_uri.starts_with("strata://") &&
      !info_.store_uri.starts_with("ipc://")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "in-place restart needs a strata coordinator's store (STRATA_STORE=",
        "strata://...), which announces generations; ",
        info_.store_uri.empty() ? "this process has none" : info_.store_uri,
        " does not"));
  }
  in_place_ = true;
  timer_->SetInPlace(true, info_.generation);
  watcher_ = std::thread([this] { Watch(); });
  return absl::OkStatus();
}

void Runtime::Watch() {
  auto log = GetLogger("RUNTIME");
  bool warned = false;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(watch_mu_);
      if (watch_cv_.wait_for(lock, kInPlacePoll, [&] { return watch_stop_; }))
        return;
    }
    auto g = ReadGeneration();
    if (!g.ok()) {
      if (!warned) {
        log->warn("rank {}: cannot read the in-place generation: {}",
                  info_.rank, g.status().ToString());
      }
      warned = true;
      continue;
    }
    warned = false;
    int seen = announced_.load();
    while (*g > seen && !announced_.compare_exchange_weak(seen, *g)) {
    }
    // Re-aborting is harmless: every Abort is idempotent.
    AbortCurrent(*g);
  }
}

void Runtime::AbortCurrent(int newer) {
  std::lock_guard<std::mutex> lock(mu_);
  if (newer <= info_.generation) return;
  if (store_ != nullptr) store_->Abort();
  if (groups_ == nullptr) return;
  for (auto* b : {groups_->tp.get(), groups_->cp.get(), groups_->dp.get(),
                  groups_->pp.get()}) {
    if (b != nullptr) b->Abort();
  }
  if (groups_->world != nullptr) groups_->world->Abort();
}

StatusOr<int> Runtime::AwaitGeneration(std::chrono::milliseconds timeout) {
  if (!in_place_) {
    return absl::FailedPreconditionError("in-place restart is not enabled");
  }
  const auto end = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto g = ReadGeneration();
    if (g.ok()) {
      int seen = announced_.load();
      while (*g > seen && !announced_.compare_exchange_weak(seen, *g)) {
      }
    }
    if (announced_.load() > info_.generation) break;
    if (std::chrono::steady_clock::now() >= end) {
      return absl::DeadlineExceededError(absl::StrCat(
          "rank ", info_.rank, ": no in-place restart generation after ",
          info_.generation, " was announced within ", timeout.count(),
          " ms", g.ok() ? "" : absl::StrCat(" (", g.status().message(), ")")));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  AbortCurrent(announced_.load());
  return announced_.load();
}

Status Runtime::Reform() {
  const int g = announced_.load();
  if (g <= info_.generation) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no newer generation than ", info_.generation, " to re-form under"));
  }
  AbortCurrent(g);
  {
    std::unique_ptr<comm::PlanGroups> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old = std::move(groups_);
    }
    timer_->SetCommSource(nullptr);
    timer_->SetLinkSource(nullptr);
    old.reset();  // joins the groups' threads; their operations were aborted
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    info_.generation = g;
    store_ = std::make_shared<comm::AbortableStore>(
        comm::NewPrefixStore(absl::StrCat("g", g), attempt_store_));
  }
  GetLogger("RUNTIME")->info("rank {}: re-forming under generation {}",
                             info_.rank, g);
  RETURN_IF_ERROR(ApplyGenerationKeys(g));
  RETURN_IF_ERROR(
      JoinRendezvous(*base_, info_, info_.store_uri, connect_timeout_));
  RETURN_IF_ERROR(BuildGroups());
  timer_->SetInPlace(true, g);
  // A generation announced while this one formed aborts it too.
  AbortCurrent(announced_.load());
  return absl::OkStatus();
}

Status Runtime::ApplyGenerationKeys(int g) {
  std::shared_ptr<comm::Store> store;
  {
    std::lock_guard<std::mutex> lock(mu_);
    store = store_;
  }
  auto read = [&](const char* key) -> StatusOr<std::optional<std::string>> {
    ASSIGN_OR_RETURN(bool present, store->Check(key));
    if (!present) return std::optional<std::string>();
    ASSIGN_OR_RETURN(std::string v, store->Get(key, std::chrono::seconds(5)));
    return std::optional<std::string>(std::move(v));
  };
  ASSIGN_OR_RETURN(std::optional<std::string> replaced,
                   read(kReplacedKey));
  if (replaced) {
    for (absl::string_view r : absl::StrSplit(*replaced, ',')) {
      int rank = -1;
      if (absl::SimpleAtoi(r, &rank) && rank == info_.rank) {
        return absl::FailedPreconditionError(absl::StrCat(
            "rank ", info_.rank, " was replaced on another node in "
            "generation ", g, " (its node was declared lost): this process "
            "must not rejoin"));
      }
    }
  }
  ASSIGN_OR_RETURN(std::optional<std::string> peers, read(kMemPeersKey));
  if (peers) {
    // No other thread of the rank reads the environment now: the groups
    // were dropped and strata-train's checkpointers are closed (Trainer::
    // Abandon) until the new ones open with these endpoints.
    setenv(checkpoint::mem::kMemPeersEnv, peers->c_str(), 1);
    GetLogger("RUNTIME")->info("rank {}: memory tier replicas now {}",
                               info_.rank, *peers);
  }
  return absl::OkStatus();
}

StatusOr<int64_t> Runtime::AgreeStep(int64_t memory_step,
                                     int64_t checkpoint_step) {
  std::shared_ptr<comm::Store> store;
  {
    std::lock_guard<std::mutex> lock(mu_);
    store = store_;
  }
  const std::string prefix = "inplace/have/";
  RETURN_IF_ERROR(store->Set(absl::StrCat(prefix, info_.rank),
                             absl::StrCat(memory_step, " ", checkpoint_step)));
  std::vector<std::string> keys;
  for (int r = 0; r < info_.world_size; ++r)
    keys.push_back(absl::StrCat(prefix, r));
  RETURN_IF_ERROR(store->Wait(keys, connect_timeout_));
  int64_t agreed = std::numeric_limits<int64_t>::max();
  for (int r = 0; r < info_.world_size; ++r) {
    ASSIGN_OR_RETURN(std::string v, store->Get(keys[r], connect_timeout_));
    std::vector<std::string> parts = absl::StrSplit(v, ' ');
    int64_t mem = 0, ckpt = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &mem) ||
        !absl::SimpleAtoi(parts[1], &ckpt)) {
      return absl::DataLossError(
          absl::StrCat("rank ", r, "'s step for the in-place restart is '",
                       v.substr(0, 40), "'"));
    }
    agreed = std::min(agreed, mem >= 0 ? mem : std::max<int64_t>(ckpt, 0));
  }
  return agreed;
}

}  // namespace strata
