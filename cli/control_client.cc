#include "cli/control_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "control/codec.h"

namespace strata::cli {
namespace {

std::string g_curve_dir_flag;  // --curve-dir of the parsed subcommand

std::optional<control::CurveClientConfig> LoadCurveOrFail(
    const std::optional<std::string>& curve_dir) {
  if (curve_dir.has_value() && curve_dir->empty()) return std::nullopt;
  auto curve = control::CurveClientConfigFromFlagOrEnv(
      curve_dir.value_or(g_curve_dir_flag));
  if (!curve.ok()) {
    std::fprintf(stderr, "strata: %s\n",
                 std::string(curve.status().message()).c_str());
    throw CLI::RuntimeError(kExitBadInput);
  }
  return *std::move(curve);
}

// Endpoint problems that are local (a typo, a host name that does not
// resolve) are reported as such, before any wait for an answer.
const std::string& ValidEndpointOrFail(const std::string& endpoint) {
  auto bad = [&](const std::string& why) {
    Fail("", kExitBadInput,
         absl::StrCat("--coordinator/STRATA_COORDINATOR '", endpoint,
                      "': ", why));
  };
  absl::string_view rest = endpoint;
  if (absl::ConsumePrefix(&rest, "ipc://")) {
    if (rest.empty()) bad("ipc:// needs a socket path");
    return endpoint;
  }
  if (absl::ConsumePrefix(&rest, "tcp://")) {
    const size_t colon = rest.rfind(':');
    int port = 0;
    if (colon == std::string_view::npos ||
        !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port <= 0 ||
        port > 65535) {
      bad("expected tcp://HOST:PORT with a port 1-65535");
    }
    std::string host(rest.substr(0, colon));
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(host.c_str(), nullptr, &hints, &found);
    // EAI_AGAIN (resolver unreachable for now) is left to ZeroMQ's retries.
    if (rc != 0 && rc != EAI_AGAIN) {
      bad(absl::StrCat("cannot resolve host '", host, "': ", gai_strerror(rc)));
    }
    if (found != nullptr) freeaddrinfo(found);
    return endpoint;
  }
  bad("expected tcp://HOST:PORT or ipc://PATH");
  return endpoint;
}

}  // namespace

void AddCoordinatorOption(CLI::App* cmd, std::string* endpoint) {
  cmd->add_option("--curve-dir", g_curve_dir_flag,
                  "CURVE client keys and the coordinator's server.key "
                  "(default: $STRATA_CURVE_DIR, else plaintext)");
  const char* env = std::getenv("STRATA_COORDINATOR");
  *endpoint = env != nullptr && *env != '\0' ? env : kDefaultCoordinator;
  cmd->add_option("--coordinator", *endpoint,
                  "coordinator endpoint (default: $STRATA_COORDINATOR or " +
                      std::string(kDefaultCoordinator) + ")")
      ->capture_default_str();
}

void Fail(const std::string& what, int code, const std::string& message) {
  std::fprintf(stderr, "strata%s%s: %s\n", what.empty() ? "" : " ",
               what.c_str(), message.c_str());
  throw CLI::RuntimeError(code);
}

ControlClient::ControlClient(const std::string& endpoint,
                             std::optional<std::string> curve_dir)
    : endpoint_(ValidEndpointOrFail(endpoint)),
      client_(&ctx_, endpoint, LoadCurveOrFail(curve_dir)) {}

StatusOr<control::Reply> ControlClient::TryCall(control::Request request,
                                                int timeout_ms) {
  return client_.Call(std::move(request), timeout_ms);
}

control::Reply ControlClient::Call(const char* what, control::Request request,
                                   int timeout_ms) {
  auto reply = client_.Call(std::move(request), timeout_ms);
  if (reply.ok()) return *std::move(reply);
  const Status& s = reply.status();
  if (absl::IsDeadlineExceeded(s)) {
    absl::string_view path = endpoint_;
    struct stat st;
    if (absl::ConsumePrefix(&path, "ipc://") &&
        stat(std::string(path).c_str(), &st) != 0) {
      Fail(what, kExitFailed,
           absl::StrCat("no answer from the coordinator at ", endpoint_,
                        ": there is no socket file ", std::string(path),
                        " (no strata-coordinator is listening there)"));
    }
    Fail(what, kExitFailed,
         absl::StrCat("no answer from the coordinator at ", endpoint_,
                      " within ", timeout_ms,
                      " ms (is strata-coordinator running? set "
                      "--coordinator or STRATA_COORDINATOR; with CURVE, is "
                      "this client's key authorized?)"));
  }
  int code = absl::IsNotFound(s) || absl::IsInvalidArgument(s) ||
                     absl::IsFailedPrecondition(s) || absl::IsOutOfRange(s)
                 ? kExitBadInput
                 : kExitFailed;
  Fail(what, code, std::string(s.message()));
}

const char* JobStateName(control::JobState s) {
  switch (s) {
    case control::PENDING:
      return "PENDING";
    case control::RUNNING:
      return "RUNNING";
    case control::SUCCEEDED:
      return "SUCCEEDED";
    case control::FAILED:
      return "FAILED";
    case control::CANCELLED:
      return "CANCELLED";
    default:
      return "UNKNOWN";
  }
}

std::string RankStateText(const control::RankReport& r) {
  switch (r.state()) {
    case control::RANK_RUNNING:
      return "running";
    case control::RANK_EXITED:
      return r.signal() != 0 ? absl::StrCat("signal ", r.signal())
                             : absl::StrCat("exited ", r.exit_code());
    case control::RANK_FAILED_TO_START:
      return "failed to start";
    default:
      return "starting";
  }
}

}  // namespace strata::cli
