#include "coordinator/server/service.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "coordinator/protocol/codec.h"

namespace strata::coordinator {

Service::Service(const Clock* clock, RegistryOptions options, JobManager* jobs)
    : registry_(clock, options), jobs_(jobs) {}

void Service::Tick() { registry_.CheckLiveness(); }

control::Reply Service::Handle(const control::Request& request) {
  control::Reply reply = MakeReply(request.request_id(), absl::OkStatus());
  switch (request.body_case()) {
    case control::Request::kRegisterWorker: {
      auto r = registry_.Register(request.register_worker());
      if (!r.ok()) return MakeReply(request.request_id(), r.status());
      *reply.mutable_register_worker() = *r;
      break;
    }
    case control::Request::kHeartbeat:
      *reply.mutable_heartbeat() = registry_.Heartbeat(request.heartbeat());
      break;
    case control::Request::kListWorkers:
      *reply.mutable_list_workers() = registry_.List();
      break;
    case control::Request::kKvSet:
      if (request.kv_set().key().empty()) {
        return MakeReply(request.request_id(),
                         absl::InvalidArgumentError("KvSet: empty key"));
      }
      kv_[request.kv_set().key()] = request.kv_set().value();
      break;
    case control::Request::kKvGet: {
      auto it = kv_.find(request.kv_get().key());
      if (it == kv_.end()) {
        return MakeReply(
            request.request_id(),
            absl::NotFoundError(absl::StrCat(
                "KvGet: key '", request.kv_get().key(), "' not set")));
      }
      reply.mutable_kv()->set_value(it->second);
      break;
    }
    case control::Request::kKvAdd: {
      // Counters are stored as decimal strings, like c10d's TCPStore.
      std::string& slot = kv_[request.kv_add().key()];
      int64_t value = 0;
      if (!slot.empty() && !absl::SimpleAtoi(slot, &value)) {
        return MakeReply(request.request_id(),
                         absl::FailedPreconditionError(absl::StrCat(
                             "KvAdd: key '", request.kv_add().key(),
                             "' holds a non-integer value")));
      }
      value += request.kv_add().delta();
      slot = absl::StrCat(value);
      reply.mutable_kv()->set_counter(value);
      break;
    }
    case control::Request::kSubmitJob:
    case control::Request::kJobStatus:
    case control::Request::kCancelJob:
    case control::Request::kListJobs:
      return HandleJob(request);
    case control::Request::BODY_NOT_SET:
      return MakeReply(request.request_id(),
                       absl::InvalidArgumentError("request has no body"));
  }
  return reply;
}

control::Reply Service::HandleJob(const control::Request& request) {
  const uint64_t id = request.request_id();
  if (jobs_ == nullptr) {
    return MakeReply(id, absl::UnimplementedError("no job manager"));
  }
  control::Reply reply = MakeReply(id, absl::OkStatus());
  StatusOr<control::JobInfo> info = absl::UnknownError("unhandled job request");
  switch (request.body_case()) {
    case control::Request::kSubmitJob: {
      auto job_id = jobs_->Submit(request.submit_job().spec());
      if (!job_id.ok()) return MakeReply(id, job_id.status());
      reply.mutable_submit_job()->set_job_id(*job_id);
      return reply;
    }
    case control::Request::kListJobs:
      *reply.mutable_jobs() = jobs_->List();
      return reply;
    case control::Request::kJobStatus:
      info = jobs_->Get(request.job_status().job_id());
      break;
    default:
      info = jobs_->Cancel(request.cancel_job().job_id());
      break;
  }
  if (!info.ok()) return MakeReply(id, info.status());
  *reply.mutable_jobs()->add_jobs() = *info;
  return reply;
}

}  // namespace strata::coordinator
