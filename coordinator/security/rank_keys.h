// Per-attempt CURVE keys of ranks (docs/security.md "Ranks"). A rank needs
// the coordinator only for its job's rendezvous KV; instead of the node's
// key it gets a keypair of its own, valid for one (job, attempt, rank):
//
//   secret = BLAKE2b-256(key = K, "strata rank key v1\0" JOB "\0" A "\0" R)
//   public = X25519 base point x secret      (zmq_curve_public)
//
// with K = BLAKE2b-256 of the coordinator's server secret key (libsodium
// crypto_generichash, RFC 7693). Deriving instead of drawing at random means
// a restarted coordinator issues the same keys again (Issue() on recovery),
// so ranks that outlived it reconnect. Issue() also enters the public key in
// the table the ZAP handler consults (Find()), under the rank's identity;
// Forget() drops a job's keys when it ends. Whether the attempt is still
// the job's current one is checked per request (access_policy.h), so a key
// of an old attempt opens nothing.
//
// Thread-safe: the job manager issues on the event loop, ZAP looks up on
// its own thread.
#pragma once

#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "control/curve_keys.h"
#include "coordinator/security/identity.h"

namespace strata::coordinator {

class RankKeys {
 public:
  // `server_secret_z85`: the coordinator's CURVE secret key (Z85).
  explicit RankKeys(const std::string& server_secret_z85);

  // The keypair of (job, attempt, rank), registered for Find().
  control::CurveKeyPair Issue(const std::string& job_id, int attempt,
                              int rank);
  // The identity of a raw 32-byte public key issued and not forgotten.
  std::optional<Identity> Find(const std::string& raw_public_key) const;
  // Drops every key of `job_id`.
  void Forget(const std::string& job_id);
  size_t size() const;

 private:
  std::string root_;  // K above, 32 raw bytes
  mutable std::mutex mu_;
  // raw public key -> identity; keys are keys issued for jobs not forgotten.
  std::map<std::string, Identity> by_key_ ABSL_GUARDED_BY(mu_);
};

}  // namespace strata::coordinator
