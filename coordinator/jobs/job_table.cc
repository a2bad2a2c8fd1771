#include "coordinator/jobs/job_table.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "coordinator/jobs/job_summary.h"

namespace strata::coordinator {

namespace {

Status NotFound(const std::string& id) {
  return absl::NotFoundError(absl::StrCat("no job '", id, "'"));
}

// What `need` refuses of a job in `state`, or OK.
Status Refuse(const std::string& id, control::JobState state,
              JobTable::Need need, absl::string_view why) {
  if (need == JobTable::Need::kActive && !JobTable::IsActive(state)) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", id, " already ended (",
                     control::JobState_Name(state), ")"));
  }
  if (need == JobTable::Need::kRunning && state != control::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", id, " is ", control::JobState_Name(state), ": ", why));
  }
  return absl::OkStatus();
}

}  // namespace

JobTable::JobTable(StateStore* store, JobRetention retention)
    : store_(store), retention_(retention) {}

JobRuntime& JobTable::AddActive(control::JobInfo info) {
  const std::string id = info.job_id();
  return active_.try_emplace(id, std::move(info)).first->second;
}

void JobTable::AddEnded(EndedJob job) {
  const std::string id = job.info.job_id();
  ended_order_.push_back(id);
  ended_.insert_or_assign(id, std::move(job));
}

void JobTable::SetEndedLedger(const std::string& id,
                              observe::GoodputLedger ledger) {
  if (auto e = ended_.find(id); e != ended_.end()) {
    e->second.goodput = std::move(ledger);
  }
}

JobRuntime* JobTable::FindActive(const std::string& id) {
  auto it = active_.find(id);
  return it == active_.end() ? nullptr : &it->second;
}

const JobRuntime* JobTable::FindActive(const std::string& id) const {
  auto it = active_.find(id);
  return it == active_.end() ? nullptr : &it->second;
}

int64_t JobTable::ActiveCount() const {
  return std::count_if(active_.begin(), active_.end(), [](const auto& j) {
    return IsActive(j.second.info.state());
  });
}

const control::JobInfo* JobTable::Held(const std::string& id) const {
  if (auto a = active_.find(id); a != active_.end()) return &a->second.info;
  if (auto e = ended_.find(id); e != ended_.end()) return &e->second.info;
  return nullptr;
}

StatusOr<control::JobInfo> JobTable::Record(const std::string& id) const {
  if (const control::JobInfo* held = Held(id)) return *held;
  auto stored = store_->Get(absl::StrCat("job/", id));
  if (absl::IsNotFound(stored.status())) return NotFound(id);
  RETURN_IF_ERROR(stored.status());
  control::JobInfo info;
  if (!info.ParseFromString(*stored)) {
    return absl::DataLossError(
        absl::StrCat("state record job/", id, " does not parse as JobInfo"));
  }
  return info;
}

StatusOr<const JobRuntime*> JobTable::Lookup(const std::string& id,
                                             Need need,
                                             absl::string_view why) const {
  if (const JobRuntime* rt = FindActive(id)) {
    RETURN_IF_ERROR(Refuse(id, rt->info.state(), need, why));
    return rt;
  }
  if (auto e = ended_.find(id); e != ended_.end()) {
    RETURN_IF_ERROR(Refuse(id, e->second.info.state(), need, why));
    return nullptr;
  }
  ASSIGN_OR_RETURN(control::JobInfo info, Record(id));
  RETURN_IF_ERROR(Refuse(id, info.state(), need, why));
  return nullptr;
}

StatusOr<JobRuntime*> JobTable::Lookup(const std::string& id, Need need,
                                       absl::string_view why) {
  ASSIGN_OR_RETURN(const JobRuntime* rt,
                   std::as_const(*this).Lookup(id, need, why));
  return const_cast<JobRuntime*>(rt);
}

void JobTable::Fill(const control::JobInfo& info,
                    const std::map<int, control::StepReport>& steps,
                    const observe::GoodputLedger* ledger, int64_t now_ms,
                    bool with_steps, control::JobInfo* out,
                    bool summary) const {
  *out = summary ? JobSummary(info) : info;
  if (with_steps) {
    for (const auto& [rank, report] : steps) *out->add_steps() = report;
  }
  const observe::Goodput g =
      ledger != nullptr
          ? ledger->At(now_ms)
          : observe::GoodputLedger(info.submit_unix_ms())
                .At(info.end_unix_ms() > 0 ? info.end_unix_ms() : now_ms);
  *out->mutable_goodput() = observe::ToProto(g);
}

StatusOr<control::JobInfo> JobTable::Describe(const std::string& id,
                                              int64_t now_ms,
                                              bool with_steps) const {
  control::JobInfo out;
  if (auto a = active_.find(id); a != active_.end()) {
    const JobRuntime& rt = a->second;
    Fill(rt.info, rt.latest_steps, &rt.goodput, now_ms, with_steps, &out);
    return out;
  }
  if (auto e = ended_.find(id); e != ended_.end()) {
    const EndedJob& job = e->second;
    Fill(job.info, job.latest_steps, job.goodput ? &*job.goodput : nullptr,
         now_ms, with_steps, &out);
    return out;
  }
  // Aged out of memory: the stored record and ledger.
  ASSIGN_OR_RETURN(control::JobInfo info, Record(id));
  std::optional<observe::GoodputLedger> ledger;
  if (auto row = store_->Get(absl::StrCat("goodput/", id)); row.ok()) {
    control::GoodputState state;
    if (state.ParseFromString(*row)) {
      if (auto restored = observe::GoodputLedger::Restore(state);
          restored.ok()) {
        ledger = *std::move(restored);
        if (info.end_unix_ms() > 0) ledger->OnJobEnd(info.end_unix_ms());
      }
    }
  }
  Fill(info, {}, ledger ? &*ledger : nullptr, now_ms, with_steps, &out);
  return out;
}

control::JobsReply JobTable::List(int64_t now_ms, bool with_steps,
                                  const std::string& after, int64_t page_bytes,
                                  bool summary) const {
  control::JobsReply reply;
  int64_t bytes = 0;
  // Both maps are in id order: merge them.
  auto a = after.empty() ? active_.begin() : active_.upper_bound(after);
  auto e = after.empty() ? ended_.begin() : ended_.upper_bound(after);
  while (a != active_.end() || e != ended_.end()) {
    if (page_bytes > 0 && reply.jobs_size() > 0 && bytes >= page_bytes) {
      reply.set_next_after_job_id(
          reply.jobs(reply.jobs_size() - 1).job_id());
      break;
    }
    control::JobInfo* out = reply.add_jobs();
    if (e == ended_.end() || (a != active_.end() && a->first < e->first)) {
      Fill(a->second.info, a->second.latest_steps, &a->second.goodput, now_ms,
           with_steps, out, summary);
      ++a;
    } else {
      const EndedJob& job = e->second;
      Fill(job.info, job.latest_steps, job.goodput ? &*job.goodput : nullptr,
           now_ms, with_steps, out, summary);
      ++e;
    }
    if (page_bytes > 0) bytes += static_cast<int64_t>(out->ByteSizeLong());
  }
  return reply;
}

std::map<std::string, observe::HistogramCounts> JobTable::StepHistograms()
    const {
  std::map<std::string, observe::HistogramCounts> out;
  for (const auto& [id, rt] : active_) {
    if (rt.step_hist.count > 0) out.emplace(id, rt.step_hist);
  }
  for (const auto& [id, job] : ended_) {
    if (job.step_hist.count > 0) out.emplace(id, job.step_hist);
  }
  return out;
}

int JobTable::Retire(int64_t now_ms) {
  for (const std::string& id : ending_) {
    auto it = active_.find(id);
    if (it == active_.end() || IsActive(it->second.info.state())) continue;
    JobRuntime& rt = it->second;
    EndedJob job{.info = std::move(rt.info),
                 .latest_steps = std::move(rt.latest_steps),
                 .goodput = std::move(rt.goodput),
                 .step_hist = std::move(rt.step_hist)};
    active_.erase(it);
    AddEnded(std::move(job));
  }
  ending_.clear();
  int dropped = 0;
  while (!ended_order_.empty()) {
    auto it = ended_.find(ended_order_.front());
    const bool too_many =
        static_cast<int64_t>(ended_.size()) > retention_.max_ended_jobs;
    const bool too_old =
        it != ended_.end() &&
        now_ms - it->second.info.end_unix_ms() > retention_.max_ended_age_ms;
    if (it != ended_.end() && !too_many && !too_old) break;
    if (it != ended_.end()) {
      ended_.erase(it);
      ++dropped;
    }
    ended_order_.pop_front();
  }
  return dropped;
}

}  // namespace strata::coordinator
