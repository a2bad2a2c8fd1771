// The jobs a coordinator holds in memory, and the one lookup every request
// about a job goes through (docs/control-plane.md "Retention").
//
//   active:  job id -> JobRuntime, for every PENDING or RUNNING job. Keys are
//            exactly the active jobs, except that a job which ended during
//            the current call stays until Retire() at the end of that call
//            (callers hold references into the map while they work).
//   ended:   job id -> EndedJob, the most recently ended jobs, at most
//            JobRetention::max_ended_jobs of them and none that ended more
//            than max_ended_age_ms ago. Keys are disjoint from active's.
//   store:   every job's record ("job/<id>"), goodput ledger and events stay
//            in the StateStore after they leave memory: a job that aged out
//            is still found by Lookup/Describe (read from the store), only
//            List() and /metrics no longer show it.
//
// Event-loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "common/status.h"
#include "coordinator/jobs/job_runtime.h"
#include "coordinator/state/state_store.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

// How long ended jobs stay in memory (strata-coordinator --keep-ended-jobs,
// --keep-ended-hours). The one place these defaults are written: 1,000 jobs
// cover a busy day of a shared cluster's `strata status`, a week its
// dashboards; their memory is bounded by the count (docs/results.md gives
// the measured per-job cost).
struct JobRetention {
  int64_t max_ended_jobs = 1000;
  int64_t max_ended_age_ms = int64_t{7} * 24 * 3600 * 1000;
};

class JobTable {
 public:
  // `store` must outlive the table.
  JobTable(StateStore* store, JobRetention retention);

  static bool IsActive(control::JobState state) {
    return state == control::PENDING || state == control::RUNNING;
  }

  // A PENDING or RUNNING job (Submit, Recover). The id must be new.
  JobRuntime& AddActive(control::JobInfo info);
  // An ended job read by Recover, subject to retention at the next Retire.
  void AddEnded(EndedJob job);

  // What a request needs of the job.
  enum class Need {
    kAny,      // it exists: the result is its runtime, or null if it ended
    kActive,   // PENDING or RUNNING
    kRunning,  // RUNNING
  };
  // The one lookup of a job by id: NotFound "no job '<id>'"; for kActive a
  // job that ended is FailedPrecondition "job <id> already ended (<STATE>)";
  // for kRunning one that does not run is FailedPrecondition "job <id> is
  // <STATE>: <why>". Jobs that aged out of memory are looked up in the
  // store.
  StatusOr<JobRuntime*> Lookup(const std::string& id, Need need,
                               absl::string_view why = "");
  StatusOr<const JobRuntime*> Lookup(const std::string& id, Need need,
                                     absl::string_view why = "") const;
  // The job as `strata status` shows it: the record, with its ranks' latest
  // step reports when `with_steps`, and its goodput at `now_ms`. NotFound.
  StatusOr<control::JobInfo> Describe(const std::string& id, int64_t now_ms,
                                      bool with_steps = true) const;
  // The record of a job held in memory (active or ended); null otherwise.
  const control::JobInfo* Held(const std::string& id) const;
  // The record of any job, from memory or the store. NotFound.
  StatusOr<control::JobInfo> Record(const std::string& id) const;

  JobRuntime* FindActive(const std::string& id);
  const JobRuntime* FindActive(const std::string& id) const;
  std::map<std::string, JobRuntime>& active() { return active_; }
  const std::map<std::string, JobRuntime>& active() const { return active_; }
  const std::map<std::string, EndedJob>& ended() const { return ended_; }
  int64_t ActiveCount() const;

  // The jobs held in memory, in id order, as Describe shows it: those after
  // `after` (all: "") up to about `page_bytes` of encoded JobInfo and at
  // least one (0: no limit); next_after_job_id set when more follow.
  // With `summary`, each as JobSummary (job_summary.h) shows it.
  control::JobsReply List(int64_t now_ms, bool with_steps,
                          const std::string& after = "",
                          int64_t page_bytes = 0, bool summary = false) const;
  // Rank 0's step times of every job held in memory.
  std::map<std::string, observe::HistogramCounts> StepHistograms() const;

  // Replaces a held ended job's goodput ledger (Recover).
  void SetEndedLedger(const std::string& id, observe::GoodputLedger ledger);

  // Marks `id` as ended: the next Retire() moves it to the history.
  void MarkEnded(const std::string& id) { ending_.push_back(id); }
  // Moves the jobs marked ended from `active` to `ended` (erasing their
  // runtimes: the one place per-job state is dropped), then drops ended
  // jobs beyond the retention's count or age at `now_ms`. Returns how many
  // left memory.
  int Retire(int64_t now_ms);

 private:
  void Fill(const control::JobInfo& info,
            const std::map<int, control::StepReport>& steps,
            const observe::GoodputLedger* ledger, int64_t now_ms,
            bool with_steps, control::JobInfo* out,
            bool summary = false) const;

  StateStore* store_;
  const JobRetention retention_;
  std::map<std::string, JobRuntime> active_;
  std::map<std::string, EndedJob> ended_;
  std::deque<std::string> ended_order_;  // keys of ended_, oldest end first
  std::vector<std::string> ending_;      // marked, not yet retired
};

}  // namespace strata::coordinator
