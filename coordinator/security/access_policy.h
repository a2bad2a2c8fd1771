// What each role may ask of the coordinator (docs/security.md "Roles"): a
// pure decision on the authenticated identity (identity.h), the request and
// the facts about the job it names.
//
//   admin, plaintext  everything
//   user              submit; list jobs (its own only, Service filters) and
//                     workers; status, cancel, logs, events, diagnose,
//                     trace, fault set of jobs it owns
//   worker (node N)   register as N; heartbeat as w-N (what the heartbeat
//                     carries is checked against placement by JobManager)
//   rank (J, A, R)    KV keys under "J/A/" while A is J's running attempt
//
// Everything else is PermissionDenied with a message naming who asked, what
// and why; Service logs it (rate-limited) and counts it.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "coordinator/security/identity.h"
#include "proto/control.pb.h"

namespace strata::coordinator {

// What the policy needs to know about one job.
struct JobFacts {
  std::string owner;  // JobInfo.owner
  int attempt = 0;
  bool running = false;
};
// nullopt when the job does not exist.
using JobLookup =
    std::function<std::optional<JobFacts>(const std::string& job_id)>;

// The worker id a worker of node `node` registers as (WorkerRegistry).
std::string WorkerIdOf(const std::string& node);

// OK, or PermissionDenied saying why `who` may not make `request`. A job
// that does not exist is left to the handler (NotFound) for admins and
// PermissionDenied for the others, so names of other users' jobs leak
// nothing.
Status CheckAccess(const Identity& who, const control::Request& request,
                   const JobLookup& jobs);

// The job a request acts on ("" for requests about no single job).
std::string JobOfRequest(const control::Request& request);

}  // namespace strata::coordinator
