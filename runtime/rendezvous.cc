#include "runtime/rendezvous.h"

#include <unistd.h>

#include <map>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/logging.h"

namespace strata {
namespace {

using SteadyClock = std::chrono::steady_clock;
constexpr auto kProgressEvery = std::chrono::seconds(5);

// A launcher's tcp:// or file:// store serves one job: the keys leave the
// job id out, so ranks that disagree on it meet and say so. The
// coordinator's store (strata://, ipc://) serves every job of the cluster:
// there the keys live in the attempt's namespace, which the coordinator
// deletes when the attempt ends.
// An in-place restart generation g > 0 (docs/fault.md "In-place restart")
// meets in a namespace of its own: the survivors and the replacement of
// generation g never see the claims of generation g - 1.
std::string Prefix(const placement::RankEnv& info) {
  const bool shared = info.store_uri.starts_with("strata://") ||
                      info.store_uri.starts_with("ipc://");
  const std::string gen =
      info.generation > 0 ? absl::StrCat(".g", info.generation) : "";
  return shared ? absl::StrCat(info.job_id, "/", info.restart_count,
                               info.generation > 0
                                   ? absl::StrCat("/g", info.generation)
                                   : "",
                               "/rendezvous/")
                : absl::StrCat("rendezvous/", info.restart_count, gen, "/");
}

std::string Describe(const placement::RankEnv& info) {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat("rank=", info.rank, " world_size=", info.world_size,
                      " job=", info.job_id, " host=", host, " pid=", getpid());
}

// "k=v k=v ..." -> map.
std::map<std::string, std::string> Fields(const std::string& desc) {
  std::map<std::string, std::string> out;
  for (absl::string_view kv : absl::StrSplit(desc, ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> p = absl::StrSplit(kv, '=');
    out[p.first] = p.second;
  }
  return out;
}

class Join {
 public:
  Join(comm::Store& store, const placement::RankEnv& info,
       const std::string& store_name, std::chrono::milliseconds timeout)
      : store_(store),
        info_(info),
        name_(store_name),
        prefix_(Prefix(info)),
        me_(Describe(info)),
        start_(SteadyClock::now()),
        deadline_(start_ + timeout) {}

  Status Run() {
    const std::string& me = me_;
    ASSIGN_OR_RETURN(int64_t n, store_.Add(Key("claims/", info_.rank), 1));
    RETURN_IF_ERROR(store_.Set(Key("rank/", info_.rank, "/", n), me));
    if (n > 1) {
      auto first = store_.Get(Key("rank/", info_.rank, "/1"),
                              std::chrono::milliseconds(0));
      return Fail(absl::StrCat("RANK=", info_.rank, " is used by ", n,
                               " processes: ", first.value_or("?"), " and ",
                               me));
    }
    if (info_.rank != 0) {
      ASSIGN_OR_RETURN(std::string zero, Await(Key("rank/0/1"), "rank 0"));
      RETURN_IF_ERROR(Compare(zero));
      RETURN_IF_ERROR(Await(Key("ready"), "rank 0 to see every rank").status());
      return absl::OkStatus();
    }
    for (int r = 1; r < info_.world_size; ++r) {
      ASSIGN_OR_RETURN(std::string peer,
                       Await(Key("rank/", r, "/1"), absl::StrCat("rank ", r)));
      RETURN_IF_ERROR(Compare(peer));
    }
    return store_.Set(Key("ready"), "1");
  }

 private:
  template <typename... T>
  std::string Key(const T&... parts) const {
    return absl::StrCat(prefix_, parts...);
  }

  // Publishes `reason` as this rank's abort and returns it.
  Status Fail(const std::string& reason) {
    PublishStartFailure(store_, info_, reason);
    return absl::InvalidArgumentError(reason);
  }

  // Named in rank order, so both sides of a mismatch say the same.
  Status Compare(const std::string& peer) {
    auto theirs = Fields(peer), mine = Fields(me_);
    auto mismatch = [&](const std::string& what, const std::string& field) {
      auto* lo = &mine;
      auto* hi = &theirs;
      int their_rank = 0;
      if (absl::SimpleAtoi(theirs["rank"], &their_rank) &&
          their_rank < info_.rank) {
        std::swap(lo, hi);
      }
      auto side = [&](std::map<std::string, std::string>& f) {
        return absl::StrCat("rank ", f["rank"], " (", f["host"], " pid ",
                            f["pid"], ") has ", what, "=", f[field]);
      };
      return Fail(
          absl::StrCat(what, " mismatch: ", side(*lo), ", ", side(*hi)));
    };
    if (theirs["world_size"] != mine["world_size"]) {
      return mismatch("WORLD_SIZE", "world_size");
    }
    if (theirs["job"] != mine["job"]) return mismatch("STRATA_JOB_ID", "job");
    return absl::OkStatus();
  }

  // Waits for `key` in slices, checking the abort key between them.
  StatusOr<std::string> Await(const std::string& key, const std::string& what) {
    auto next_log = start_ + kProgressEvery;
    for (;;) {
      ASSIGN_OR_RETURN(bool aborted, store_.Check(Key("abort")));
      if (aborted) {
        ASSIGN_OR_RETURN(
            std::string why,
            store_.Get(Key("abort"), std::chrono::milliseconds(0)));
        std::pair<std::string, std::string> p =
            absl::StrSplit(why, absl::MaxSplits(": ", 1));
        return absl::AbortedError(
            absl::StrCat("rank ", p.first, " failed: ", p.second));
      }
      const auto now = SteadyClock::now();
      if (now >= deadline_) {
        return absl::DeadlineExceededError(absl::StrCat(
            "rank ", info_.rank, " waited ", Seconds(now), " s for ", what,
            " to join the rendezvous at ", name_,
            " (WORLD_SIZE=", info_.world_size, ", job '", info_.job_id,
            "'); is every rank started, with the same STRATA_STORE?"));
      }
      if (now >= next_log) {
        GetLogger("INIT")->warn(
            "rank {}: waiting for {} to join the rendezvous at {}, {}s of {}",
            info_.rank, what, name_, Seconds(now), Seconds(deadline_));
        next_log = now + kProgressEvery;
      }
      const auto slice = std::min<SteadyClock::duration>(
          kRendezvousPollInterval, deadline_ - now);
      Status s = store_.Wait(
          {key}, std::chrono::duration_cast<std::chrono::milliseconds>(slice));
      if (s.ok()) return store_.Get(key, std::chrono::milliseconds(0));
      if (!absl::IsDeadlineExceeded(s)) return s;
    }
  }

  int64_t Seconds(SteadyClock::time_point t) const {
    return std::chrono::duration_cast<std::chrono::seconds>(t - start_).count();
  }

  comm::Store& store_;
  const placement::RankEnv& info_;
  const std::string name_, prefix_, me_;
  const SteadyClock::time_point start_, deadline_;
};

}  // namespace

Status JoinRendezvous(comm::Store& store, const placement::RankEnv& info,
                      const std::string& store_name,
                      std::chrono::milliseconds timeout) {
  return Join(store, info, store_name, timeout).Run();
}

void PublishStartFailure(comm::Store& store, const placement::RankEnv& info,
                         const std::string& reason) {
  const std::string key = Prefix(info) + "abort";
  auto present = store.Check(key);
  if (present.ok() && *present) return;  // the first failure is the cause
  (void)store.Set(key, absl::StrCat(info.rank, ": ", reason));
}

}  // namespace strata
