#include "coordinator/security/access_policy.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace strata::coordinator {
namespace {

using control::Request;

Status Deny(const Identity& who, absl::string_view what, absl::string_view why) {
  return absl::PermissionDeniedError(
      absl::StrCat(who.Describe(), " may not ", what, ": ", why));
}

absl::string_view WhatOf(const Request& r) {
  switch (r.body_case()) {
    case Request::kRegisterWorker: return "register a worker";
    case Request::kHeartbeat: return "send a worker heartbeat";
    case Request::kListWorkers: return "list workers";
    case Request::kKvSet: case Request::kKvGet: case Request::kKvAdd:
    case Request::kKvWait: case Request::kKvDelete:
      return "use the KV store";
    case Request::kSubmitJob: return "submit jobs";
    case Request::kJobStatus: return "read a job's status";
    case Request::kCancelJob: return "cancel a job";
    case Request::kListJobs: return "list jobs";
    case Request::kLogs: return "read a job's output";
    case Request::kEvents: return "read events";
    case Request::kDiagnose: return "diagnose a job";
    case Request::kFaultSet: return "change a job's fault policy";
    case Request::kTrace: return "trace a job";
    case Request::BODY_NOT_SET: break;
  }
  return "send an empty request";
}

std::vector<std::string> KvKeys(const Request& r) {
  switch (r.body_case()) {
    case Request::kKvSet: return {r.kv_set().key()};
    case Request::kKvGet: return {r.kv_get().key()};
    case Request::kKvAdd: return {r.kv_add().key()};
    case Request::kKvDelete: return {r.kv_delete().key()};
    case Request::kKvWait:
      return {r.kv_wait().keys().begin(), r.kv_wait().keys().end()};
    default: return {};
  }
}

Status CheckWorker(const Identity& who, const Request& r) {
  if (r.has_register_worker()) {
    if (r.register_worker().node_name() == who.name) return absl::OkStatus();
    return Deny(who, WhatOf(r),
                absl::StrCat("its key is bound to node '", who.name,
                             "', not '", r.register_worker().node_name(),
                             "'"));
  }
  if (r.has_heartbeat()) {
    if (r.heartbeat().worker_id() == WorkerIdOf(who.name)) {
      return absl::OkStatus();
    }
    return Deny(who, WhatOf(r),
                absl::StrCat("it is ", WorkerIdOf(who.name), ", not '",
                             r.heartbeat().worker_id(), "'"));
  }
  return Deny(who, WhatOf(r), "workers only register and heartbeat");
}

Status CheckRank(const Identity& who, const Request& r,
                 const JobLookup& jobs) {
  std::vector<std::string> keys = KvKeys(r);
  if (keys.empty() && !r.has_kv_wait()) {
    return Deny(who, WhatOf(r),
                "a rank's key opens only its attempt's KV namespace");
  }
  auto job = jobs(who.job_id);
  if (!job || !job->running || job->attempt != who.attempt) {
    return Deny(who, WhatOf(r),
                "its attempt is no longer the job's running attempt");
  }
  const std::string prefix = absl::StrCat(who.job_id, "/", who.attempt, "/");
  for (const std::string& k : keys) {
    if (!absl::StartsWith(k, prefix)) {
      return Deny(who, absl::StrCat("touch KV key '", k, "'"),
                  absl::StrCat("its keys are under '", prefix, "'"));
    }
  }
  return absl::OkStatus();
}

Status CheckUser(const Identity& who, const Request& r,
                 const JobLookup& jobs) {
  switch (r.body_case()) {
    case Request::kSubmitJob:
    case Request::kListJobs:
    case Request::kListWorkers:
      return absl::OkStatus();
    case Request::kEvents:
      if (r.events().job_id().empty()) {
        return Deny(who, "read every job's events", "name one of your jobs");
      }
      break;
    case Request::kJobStatus: case Request::kCancelJob: case Request::kLogs:
    case Request::kDiagnose: case Request::kFaultSet: case Request::kTrace:
      break;
    default:
      return Deny(who, WhatOf(r), "users submit and manage their own jobs");
  }
  const std::string id = JobOfRequest(r);
  auto job = jobs(id);
  if (!job || job->owner != who.name) {
    return Deny(who, absl::StrCat(WhatOf(r), " of ", id),
                "it is not a job of theirs");
  }
  return absl::OkStatus();
}

}  // namespace

std::string WorkerIdOf(const std::string& node) {
  return absl::StrCat("w-", node);
}

std::string JobOfRequest(const Request& r) {
  switch (r.body_case()) {
    case Request::kJobStatus: return r.job_status().job_id();
    case Request::kCancelJob: return r.cancel_job().job_id();
    case Request::kLogs: return r.logs().job_id();
    case Request::kEvents: return r.events().job_id();
    case Request::kDiagnose: return r.diagnose().job_id();
    case Request::kFaultSet: return r.fault_set().job_id();
    case Request::kTrace: return r.trace().job_id();
    default: return "";
  }
}

Status CheckAccess(const Identity& who, const Request& request,
                   const JobLookup& jobs) {
  if (who.plaintext) return absl::OkStatus();
  switch (who.role) {
    case Role::kAdmin: return absl::OkStatus();
    case Role::kUser: return CheckUser(who, request, jobs);
    case Role::kWorker: return CheckWorker(who, request);
    case Role::kRank: return CheckRank(who, request, jobs);
  }
  return Deny(who, WhatOf(request), "unknown role");
}

}  // namespace strata::coordinator
