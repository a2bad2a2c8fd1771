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

void EventLog::Record(const std::string& job_id, int attempt,
                      const std::string& kind, const std::string& message) {
  control::Event e;
  e.set_seq(++last_seq_);
  e.set_unix_ms(clock_->NowMs());
  e.set_job_id(job_id);
  e.set_attempt(attempt);
  e.set_kind(kind);
  e.set_message(message);
  logger_->info("event {} attempt {}: {}: {}", job_id, attempt, kind, message);
  Status s = store_->Put(absl::StrFormat("event/%s/%012d", job_id, e.seq()),
                         e.SerializeAsString());
  if (!s.ok()) logger_->error("storing event: {}", s.ToString());
}

StatusOr<control::EventsReply> EventLog::List(const std::string& job_id,
                                              int64_t after_seq) {
  ASSIGN_OR_RETURN(auto rows,
                   store_->Scan(job_id.empty() ? std::string("event/")
                                               : absl::StrCat("event/", job_id,
                                                              "/")));
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
