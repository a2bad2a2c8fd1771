#include "coordinator/server/service.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "control/codec.h"

namespace strata::coordinator {
namespace {
Status Missing(const char* what) {
  return absl::UnimplementedError(
      absl::StrCat("this coordinator has no ", what));
}
}  // namespace

Service::Service(const Clock* clock, RegistryOptions options, Services services)
    : clock_(clock),
      options_(options),
      registry_(clock, options),
      s_(services),
      limiter_(GetLogger("CTRL"), {}, clock) {}

void Service::NoteLoopGap(int64_t gap_ms) {
  if (gap_ms <= options_.heartbeat_interval_ms) return;
  registry_.GraceAfterPause();
  const std::string what = absl::StrCat(
      "the coordinator did not run for ", gap_ms, " ms (paused?); workers get ",
      options_.lost_after_ms, " ms to report before any is declared lost");
  GetLogger("CTRL")->warn("{}", what);
  if (s_.events != nullptr)
    s_.events->Record("", 0, "coordinator_paused", what);
}

control::CoordinatorHealth Service::Health() const {
  control::CoordinatorHealth h;
  if (s_.store == nullptr) return h;
  const StoreHealth& sh = s_.store->health();
  h.set_state_dir(s_.store->dir());
  if (sh.writable) return h;
  h.set_state_error(sh.error);
  h.set_since_unix_ms(sh.since_unix_ms);
  h.set_refused_changes(sh.failed_writes);
  return h;
}

void Service::Tick() {
  if (s_.store != nullptr) {
    s_.store->MaybeResume();
    // After a reopen the disk may hold writes that were reported failed:
    // put memory (what was acknowledged) back before anything else.
    if (s_.store->generation() != synced_generation_ &&
        s_.store->health().writable) {
      Status s = s_.jobs != nullptr ? s_.jobs->Resync() : absl::OkStatus();
      if (s.ok() && s_.kv != nullptr) s = s_.kv->Resync();
      if (s.ok()) synced_generation_ = s_.store->generation();
    }
  }
  limiter_.Flush();
  std::vector<std::string> lost;
  for (const auto& id : registry_.CheckLiveness()) {
    lost.push_back(absl::StrCat(id, " missed its heartbeats"));
  }
  if (s_.events != nullptr) s_.events->RecordAll("worker_lost", lost);
  if (s_.jobs != nullptr) s_.jobs->Tick(registry_);
}

control::Reply Service::Handle(const control::Request& request,
                               const Identity& who) {
  auto reply = HandleBody(request, who);
  if (!reply.ok())
    return control::MakeReply(request.request_id(), reply.status());
  return *std::move(reply);
}

StatusOr<control::Reply> Service::HandleBody(const control::Request& request,
                                             const Identity& who) {
  Status allowed = CheckAccess(who, request, [&](const std::string& id) {
    return s_.jobs != nullptr ? s_.jobs->Facts(id) : std::nullopt;
  });
  if (!allowed.ok()) {
    ++denied_;
    limiter_.Warn(who.Describe(), "denied", "refused: {} ({} refusals so far)",
                  std::string(allowed.message()), denied_);
    return allowed;
  }
  control::Reply reply =
      control::MakeReply(request.request_id(), absl::OkStatus());
  switch (request.body_case()) {
    case control::Request::kRegisterWorker: {
      ASSIGN_OR_RETURN(*reply.mutable_register_worker(),
                       registry_.Register(request.register_worker()));
      if (s_.jobs != nullptr) {
        // Re-adoption after a coordinator restart: the ranks it still runs.
        // Orders follow with the next heartbeat.
        control::HeartbeatReply ignored;
        s_.jobs->OnWorkerReport(reply.register_worker().worker_id(),
                                request.register_worker().ranks(), &ignored);
      }
      return reply;
    }
    case control::Request::kHeartbeat:
      return HandleHeartbeat(request);
    case control::Request::kListWorkers:
      *reply.mutable_list_workers() = registry_.List();
      *reply.mutable_list_workers()->mutable_health() = Health();
      return reply;
    case control::Request::kKvSet:
    case control::Request::kKvGet:
    case control::Request::kKvAdd:
    case control::Request::kKvWait:
    case control::Request::kKvDelete:
      return HandleKv(request);
    case control::Request::kEvents: {
      if (s_.events == nullptr) return Missing("event log");
      if (!request.events().job_id().empty() && s_.jobs != nullptr) {
        RETURN_IF_ERROR(s_.jobs->Get(request.events().job_id()).status());
      }
      ASSIGN_OR_RETURN(*reply.mutable_events(),
                       s_.events->List(request.events().job_id(),
                                       request.events().after_seq()));
      return reply;
    }
    case control::Request::kDiagnose: {
      if (s_.jobs == nullptr) return Missing("job manager");
      ASSIGN_OR_RETURN(*reply.mutable_diagnose(),
                       s_.jobs->Diagnose(request.diagnose()));
      return reply;
    }
    case control::Request::kTrace: {
      if (s_.jobs == nullptr) return Missing("job manager");
      ASSIGN_OR_RETURN(*reply.mutable_trace(),
                       s_.jobs->Trace(request.trace(), registry_));
      return reply;
    }
    case control::Request::kFaultSet: {
      if (s_.jobs == nullptr) return Missing("job manager");
      ASSIGN_OR_RETURN(*reply.mutable_jobs()->add_jobs(),
                       s_.jobs->SetFaultPolicy(request.fault_set().job_id(),
                                               request.fault_set().settings()));
      return reply;
    }
    case control::Request::kLogs: {
      if (s_.logs == nullptr || s_.jobs == nullptr) return Missing("log store");
      ASSIGN_OR_RETURN(control::JobInfo job,
                       s_.jobs->Get(request.logs().job_id()));
      // Read the state first: output relayed after the job ended arrives
      // before the end is recorded, so `finished` is never premature.
      bool ended =
          job.state() != control::PENDING && job.state() != control::RUNNING;
      ASSIGN_OR_RETURN(*reply.mutable_logs(), s_.logs->Read(request.logs()));
      reply.mutable_logs()->set_finished(ended && reply.logs().data().empty());
      return reply;
    }
    case control::Request::kSubmitJob: {
      if (s_.jobs == nullptr) return Missing("job manager");
      // The owner is who submitted; plaintext jobs have none.
      ASSIGN_OR_RETURN(std::string id,
                       s_.jobs->Submit(request.submit_job().spec(), &registry_,
                                       who.plaintext ? "" : who.name));
      reply.mutable_submit_job()->set_job_id(id);
      return reply;
    }
    case control::Request::kListJobs:
      if (s_.jobs == nullptr) return Missing("job manager");
      *reply.mutable_jobs() =
          s_.jobs->List(/*with_steps=*/false, request.list_jobs().after_job_id(),
                        request.list_jobs().page_bytes());
      if (!who.plaintext && who.role == Role::kUser) {
        auto* jobs = reply.mutable_jobs()->mutable_jobs();
        jobs->erase(std::remove_if(jobs->begin(), jobs->end(),
                                   [&](const control::JobInfo& j) {
                                     return j.owner() != who.name;
                                   }),
                    jobs->end());
      }
      *reply.mutable_jobs()->mutable_health() = Health();
      return reply;
    case control::Request::kJobStatus:
    case control::Request::kCancelJob:
      return HandleJob(request);
    case control::Request::BODY_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("request has no body");
}

StatusOr<control::Reply> Service::HandleHeartbeat(
    const control::Request& request) {
  control::Reply reply =
      control::MakeReply(request.request_id(), absl::OkStatus());
  const int64_t received_us = clock_->NowUs();
  control::HeartbeatReply* out = reply.mutable_heartbeat();
  *out = registry_.Heartbeat(request.heartbeat());
  if (out->reregister()) return reply;
  control::HeartbeatRequest copy;
  const control::HeartbeatRequest& hb = PlacedOnly(request.heartbeat(), &copy);
  registry_.SetHolds(hb.worker_id(), hb.ranks());
  if (s_.jobs != nullptr) {
    s_.jobs->OnLogs(hb.logs());
    if (int dropped = s_.jobs->OnSteps(hb.worker_id(), hb.steps());
        dropped > 0) {
      dropped_reports_ += dropped;
      limiter_.Warn(hb.worker_id(), "steps",
                    "dropped {} step report(s) from {}: not of a rank placed "
                    "on it in the running attempt, not moving forward, or "
                    "past the job's declared steps ({} dropped so far)",
                    dropped, hb.worker_id(), dropped_reports_);
    }
    s_.jobs->OnFlights(hb.flights());
    s_.jobs->OnMemNotices(hb.worker_id(), hb.mem_notices());
    s_.jobs->OnTraces(hb.traces());
    s_.jobs->OnWorkerReport(hb.worker_id(), hb.ranks(), out);
  }
  // The sample for the worker's clock estimate; the answer's stamp last.
  out->set_coordinator_recv_unix_us(received_us);
  out->set_coordinator_unix_us(clock_->NowUs());
  return reply;
}

const control::HeartbeatRequest& Service::PlacedOnly(
    const control::HeartbeatRequest& hb, control::HeartbeatRequest* copy) {
  if (s_.jobs == nullptr) return hb;
  const std::string& w = hb.worker_id();
  auto placed = [&](const auto& r) {
    return s_.jobs->PlacedOn(w, r.job_id(), r.attempt(), r.rank());
  };
  auto relayable = [&](const control::LogChunk& c) {
    return s_.jobs->MayRelayLogs(w, c.job_id(), c.attempt(), c.rank());
  };
  const bool all =
      std::all_of(hb.logs().begin(), hb.logs().end(), relayable) &&
      std::all_of(hb.flights().begin(), hb.flights().end(), placed) &&
      std::all_of(hb.traces().begin(), hb.traces().end(), placed);
  if (all) return hb;
  *copy = hb;
  int dropped = 0;
  auto keep = [&](auto* field, auto ok) {
    const int before = field->size();
    field->erase(std::remove_if(field->begin(), field->end(),
                                [&](const auto& r) { return !ok(r); }),
                 field->end());
    dropped += before - field->size();
  };
  keep(copy->mutable_logs(), relayable);
  keep(copy->mutable_flights(), placed);
  keep(copy->mutable_traces(), placed);
  dropped_reports_ += dropped;
  limiter_.Warn(w, "reports",
                "dropped {} log/flight/trace report(s) from {} about ranks "
                "not placed on it in the running attempt",
                dropped, w);
  return *copy;
}

StatusOr<control::Reply> Service::HandleKv(const control::Request& request) {
  if (s_.kv == nullptr) return Missing("key-value store");
  control::Reply reply =
      control::MakeReply(request.request_id(), absl::OkStatus());
  switch (request.body_case()) {
    case control::Request::kKvSet:
      RETURN_IF_ERROR(
          s_.kv->Set(request.kv_set().key(), request.kv_set().value()));
      break;
    case control::Request::kKvGet: {
      ASSIGN_OR_RETURN(*reply.mutable_kv()->mutable_value(),
                       s_.kv->Get(request.kv_get().key()));
      break;
    }
    case control::Request::kKvAdd: {
      ASSIGN_OR_RETURN(int64_t v, s_.kv->Add(request.kv_add().key(),
                                             request.kv_add().delta()));
      reply.mutable_kv()->set_counter(v);
      break;
    }
    case control::Request::kKvWait: {
      std::vector<std::string> keys(request.kv_wait().keys().begin(),
                                    request.kv_wait().keys().end());
      for (auto& k : s_.kv->Missing(keys)) reply.mutable_kv()->add_missing(k);
      break;
    }
    default: {
      RETURN_IF_ERROR(s_.kv->Delete(request.kv_delete().key()));
      break;
    }
  }
  return reply;
}

StatusOr<control::Reply> Service::HandleJob(const control::Request& request) {
  if (s_.jobs == nullptr) return Missing("job manager");
  control::Reply reply =
      control::MakeReply(request.request_id(), absl::OkStatus());
  control::JobInfo info;
  switch (request.body_case()) {
    case control::Request::kJobStatus: {
      ASSIGN_OR_RETURN(info, s_.jobs->Get(request.job_status().job_id()));
      break;
    }
    default: {
      ASSIGN_OR_RETURN(info, s_.jobs->Cancel(request.cancel_job().job_id()));
      break;
    }
  }
  *reply.mutable_jobs()->add_jobs() = std::move(info);
  *reply.mutable_jobs()->mutable_health() = Health();
  return reply;
}

}  // namespace strata::coordinator
