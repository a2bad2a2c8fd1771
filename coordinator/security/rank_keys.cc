#include "coordinator/security/rank_keys.h"

#include <sodium.h>
#include <zmq.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"

namespace strata::coordinator {
namespace {

constexpr char kDomain[] = "strata rank key v1";

std::string Z85(const unsigned char* raw) {
  char out[control::kZ85KeyChars + 1] = {0};
  zmq_z85_encode(out, raw, 32);
  return out;
}

}  // namespace

RankKeys::RankKeys(const std::string& server_secret_z85) : root_(32, '\0') {
  const std::string raw = control::DecodeZ85Key(server_secret_z85);
  crypto_generichash(reinterpret_cast<unsigned char*>(root_.data()), 32,
                     reinterpret_cast<const unsigned char*>(raw.data()),
                     raw.size(), nullptr, 0);
}

control::CurveKeyPair RankKeys::Issue(const std::string& job_id, int attempt,
                                      int rank) {
  const std::string message = absl::StrCat(
      absl::string_view(kDomain, sizeof(kDomain)), job_id, std::string(1, '\0'),
      attempt, std::string(1, '\0'), rank);
  unsigned char secret[32];
  crypto_generichash(secret, sizeof(secret),
                     reinterpret_cast<const unsigned char*>(message.data()),
                     message.size(),
                     reinterpret_cast<const unsigned char*>(root_.data()),
                     root_.size());
  control::CurveKeyPair keys;
  keys.secret_key = Z85(secret);
  char pub[control::kZ85KeyChars + 1] = {0};
  STRATA_CHECK_EQ(zmq_curve_public(pub, keys.secret_key.c_str()), 0);
  keys.public_key = pub;
  Identity who;
  who.role = Role::kRank;
  who.job_id = job_id;
  who.attempt = attempt;
  who.rank = rank;
  std::lock_guard<std::mutex> lock(mu_);
  by_key_[control::DecodeZ85Key(keys.public_key)] = std::move(who);
  return keys;
}

std::optional<Identity> RankKeys::Find(const std::string& raw) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_key_.find(raw);
  if (it == by_key_.end()) return std::nullopt;
  return it->second;
}

void RankKeys::Forget(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(by_key_,
                [&](const auto& kv) { return kv.second.job_id == job_id; });
}

size_t RankKeys::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_key_.size();
}

}  // namespace strata::coordinator
