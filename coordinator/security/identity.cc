#include "coordinator/security/identity.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace strata::coordinator {

std::string Identity::Describe() const {
  if (plaintext) return "a plaintext client";
  switch (role) {
    case Role::kAdmin:
      return absl::StrCat("admin ", name);
    case Role::kUser:
      return absl::StrCat("user ", name);
    case Role::kWorker:
      return absl::StrCat("the worker of node ", name);
    case Role::kRank:
      return absl::StrCat("rank ", rank, " of ", job_id, " attempt ", attempt);
  }
  return "?";
}

Identity PlaintextIdentity() {
  Identity who;
  who.role = Role::kAdmin;
  who.name = "plaintext";
  who.plaintext = true;
  return who;
}

std::string ZapUserId(const Identity& who) {
  switch (who.role) {
    case Role::kAdmin:
      return absl::StrCat("admin:", who.name);
    case Role::kUser:
      return absl::StrCat("user:", who.name);
    case Role::kWorker:
      return absl::StrCat("worker:", who.name);
    case Role::kRank:
      return absl::StrCat("rank:", who.job_id, "/", who.attempt, "/",
                          who.rank);
  }
  return "";
}

StatusOr<Identity> ParseZapUserId(absl::string_view text) {
  const size_t colon = text.find(':');
  auto bad = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(text), "' is not a strata ZAP user id"));
  };
  if (colon == absl::string_view::npos || colon + 1 == text.size()) {
    return bad();
  }
  const absl::string_view kind = text.substr(0, colon);
  const std::string rest(text.substr(colon + 1));
  Identity who;
  who.name = rest;
  if (kind == "admin") {
    who.role = Role::kAdmin;
  } else if (kind == "user") {
    who.role = Role::kUser;
  } else if (kind == "worker") {
    who.role = Role::kWorker;
  } else if (kind == "rank") {
    who.role = Role::kRank;
    who.name.clear();
    std::vector<std::string> parts = absl::StrSplit(rest, '/');
    if (parts.size() != 3 || parts[0].empty() ||
        !absl::SimpleAtoi(parts[1], &who.attempt) ||
        !absl::SimpleAtoi(parts[2], &who.rank)) {
      return bad();
    }
    who.job_id = parts[0];
  } else {
    return bad();
  }
  return who;
}

}  // namespace strata::coordinator
