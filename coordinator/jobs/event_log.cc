#include "coordinator/jobs/event_log.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace strata::coordinator {

EventLog::EventLog(const Clock* clock, StateStore* store)
    : clock_(clock), store_(store), logger_(GetLogger("CTRL")) {}

Status EventLog::Recover() {
  ASSIGN_OR_RETURN(auto rows, store_->Scan("event/"));
  for (const auto& [key, value] : rows) {
    control::Event e;
    if (!e.ParseFromString(value)) {
      return absl::DataLossError(
          absl::StrCat("state record ", key, " does not parse as Event"));
    }
    last_seq_ = std::max(last_seq_, e.seq());
  }
  return absl::OkStatus();
}

namespace {
control::Event NewEvent(const std::string& job_id, int attempt,
                        const std::string& kind, const std::string& message) {
  control::Event e;
  e.set_job_id(job_id);
  e.set_attempt(attempt);
  e.set_kind(kind);
  e.set_message(message);
  e.set_rank(-1);
  return e;
}
}  // namespace

void EventLog::Record(const std::string& job_id, int attempt,
                      const std::string& kind, const std::string& message) {
  Store(NewEvent(job_id, attempt, kind, message));
}

void EventLog::Record(const std::string& job_id, int attempt,
                      const fault::FaultEvent& f, const std::string& message) {
  control::Event e =
      NewEvent(job_id, attempt, fault::EventKindName(f.kind), message);
  e.set_step(f.step);
  e.set_rank(f.rank);
  e.set_node(f.node);
  e.set_peer_node(f.peer_node);
  e.set_slowdown(f.slowdown);
  e.set_section(f.section);
  e.set_evidence(f.evidence);
  e.set_stage(f.stage);
  Store(std::move(e));
}

void EventLog::Record(const std::string& job_id, int attempt,
                      const std::string& kind, const std::string& message,
                      int rank, const std::string& node, int64_t step,
                      const std::string& evidence) {
  control::Event e = NewEvent(job_id, attempt, kind, message);
  e.set_rank(rank);
  e.set_node(node);
  e.set_step(step);
  e.set_evidence(evidence);
  Store(std::move(e));
}

void EventLog::RecordAll(const std::string& kind,
                         const std::vector<std::string>& messages) {
  std::vector<StateStore::Mutation> rows;
  for (const std::string& m : messages) {
    rows.push_back(Stamp(NewEvent("", 0, kind, m)));
  }
  if (rows.empty()) return;
  Status s = store_->Write(rows);
  if (!s.ok()) {
    logger_->error("storing {} events: {}", rows.size(), s.ToString());
  }
}

StateStore::Mutation EventLog::Stamp(control::Event e) {
  e.set_seq(++last_seq_);
  e.set_unix_ms(clock_->NowMs());
  logger_->info("event {} attempt {}: {}: {}", e.job_id(), e.attempt(),
                e.kind(), e.message());
  return {absl::StrFormat("event/%s/%012d", e.job_id(), e.seq()),
          e.SerializeAsString()};
}

void EventLog::Store(control::Event e) {
  auto [key, value] = Stamp(std::move(e));
  Status s = store_->Put(key, *value);
  if (!s.ok()) logger_->error("storing event: {}", s.ToString());
}

StatusOr<control::EventsReply> EventLog::List(const std::string& job_id,
                                              int64_t after_seq) {
  ASSIGN_OR_RETURN(
      auto rows,
      store_->Scan(job_id.empty() ? std::string("event/")
                                  : absl::StrCat("event/", job_id, "/")));
  control::EventsReply reply;
  for (const auto& [key, value] : rows) {
    control::Event e;
    if (!e.ParseFromString(value)) {
      return absl::DataLossError(
          absl::StrCat("state record ", key, " does not parse as Event"));
    }
    if (e.seq() > after_seq) *reply.add_events() = std::move(e);
  }
  std::sort(reply.mutable_events()->begin(), reply.mutable_events()->end(),
            [](const control::Event& a, const control::Event& b) {
              return a.seq() < b.seq();
            });
  return reply;
}

}  // namespace strata::coordinator
