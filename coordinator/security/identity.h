// Who sent a control request (docs/security.md "Roles"). Under CURVE the ZAP
// handler (zap_handler.h) maps the client's authenticated public key to an
// identity and hands it to libzmq as the ZAP user id (RFC 27); libzmq then
// attaches it to every message of that connection ("User-Id" metadata),
// where RouterServer reads it back with ParseZapUserId. In plaintext mode
// there is no authentication: every peer is PlaintextIdentity(), an admin.
//
// User id text (one line, no spaces):
//   admin:NAME   user:NAME   worker:NODE   rank:JOB/ATTEMPT/RANK
#pragma once

#include <string>
#include "absl/strings/string_view.h"

#include "common/status.h"

namespace strata::coordinator {

enum class Role { kAdmin, kUser, kWorker, kRank };

struct Identity {
  Role role = Role::kAdmin;
  // admin/user: the person's name; worker: its node name.
  std::string name;
  // rank only: the one job, attempt and rank its key was issued for.
  std::string job_id;
  int attempt = -1;
  int rank = -1;
  bool plaintext = false;  // no authentication happened (trusted network)

  // "user alice", "worker dn1", "rank 3 of job-2 attempt 1", for refusals.
  std::string Describe() const;
};

Identity PlaintextIdentity();
// The ZAP user id of `who` (format above) and its inverse; InvalidArgument
// for text that is not one.
std::string ZapUserId(const Identity& who);
StatusOr<Identity> ParseZapUserId(absl::string_view text);

}  // namespace strata::coordinator
