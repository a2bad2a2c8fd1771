#include "coordinator/jobs/job_goodput.h"

#include "absl/strings/str_cat.h"

namespace strata::coordinator {

namespace {
constexpr char kPrefix[] = "goodput/";
}  // namespace

Status GoodputBook::Restore(JobTable& table,
                            const std::set<std::string>& stored_jobs) {
  ASSIGN_OR_RETURN(auto ledgers, store_->Scan(kPrefix));
  for (const auto& [key, value] : ledgers) {
    const std::string id = key.substr(sizeof(kPrefix) - 1);
    control::GoodputState state;
    StatusOr<observe::GoodputLedger> ledger =
        state.ParseFromString(value)
            ? observe::GoodputLedger::Restore(state)
            : absl::InvalidArgumentError("does not parse as GoodputState");
    if (!stored_jobs.contains(id) || !ledger.ok()) {
      // Accounting only: the job runs on, its goodput counted from now as
      // start-up.
      logger_->warn("state record {} dropped: {}", key,
                    !stored_jobs.contains(id) ? "no such job"
                                              : ledger.status().ToString());
      continue;
    }
    if (JobRuntime* rt = table.FindActive(id)) {
      rt->goodput = *std::move(ledger);
    } else if (auto ended = table.ended().find(id);
               ended != table.ended().end()) {
      // Ended while the ledger's last save was older than the end.
      if (ended->second.info.end_unix_ms() > 0) {
        ledger->OnJobEnd(ended->second.info.end_unix_ms());
      }
      table.SetEndedLedger(id, *std::move(ledger));
    }
  }
  return absl::OkStatus();
}

void GoodputBook::OnRankZeroStep(JobRuntime& rt, const control::StepReport& s) {
  auto ckpt = s.section_seconds().find("checkpoint");
  rt.goodput.OnStep(rt.info.attempt(), s.step(), s.unix_ms(), s.step_seconds(),
                    ckpt == s.section_seconds().end() ? 0 : ckpt->second);
  rt.step_hist.Add(observe::SecondsBuckets(), s.step_seconds());
}

void GoodputBook::SaveDue(const JobTable& table) {
  const int64_t now = clock_->NowMs();
  if (now - saved_ms_ < kSaveIntervalMs) return;
  saved_ms_ = now;
  std::vector<StateStore::Mutation> rows;
  for (const auto& [id, rt] : table.active()) {
    if (!JobTable::IsActive(rt.info.state())) continue;
    rows.emplace_back(absl::StrCat(kPrefix, id),
                      rt.goodput.Save().SerializeAsString());
  }
  Write(rows);
}

void GoodputBook::Save(const JobRuntime& rt) {
  Write({{absl::StrCat(kPrefix, rt.info.job_id()),
          rt.goodput.Save().SerializeAsString()}});
}

void GoodputBook::Write(const std::vector<StateStore::Mutation>& rows) {
  if (rows.empty()) return;
  // Not synced: losing the last seconds of accounting in a machine crash is
  // acceptable, a sync per save on the event loop is not.
  Status s = store_->Write(rows, /*sync=*/false);
  if (!s.ok()) logger_->warn("saving goodput: {}", s.ToString());
}

}  // namespace strata::coordinator
