// Talking to the coordinator from `strata` subcommands: endpoint selection
// (--coordinator, else $STRATA_COORDINATOR, else tcp://127.0.0.1:7077) and a
// call wrapper that turns transport and service errors into one message on
// stderr and the exit codes of commands.h (unreachable coordinator = 1,
// NotFound/InvalidArgument from the service = 2).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <zmq.hpp>

#include "cli/commands.h"
#include "control/dealer_client.h"
#include "proto/control.pb.h"

namespace strata::cli {

inline constexpr char kDefaultCoordinator[] = "tcp://127.0.0.1:7077";

// Adds --coordinator to `cmd`, defaulting from the environment, and
// --curve-dir (CURVE client keys; default $STRATA_CURVE_DIR, else plaintext).
void AddCoordinatorOption(CLI::App* cmd, std::string* endpoint);

class ControlClient {
 public:
  // `curve_dir`: nullopt = the --curve-dir option / $STRATA_CURVE_DIR; a
  // value = that curve dir ("" = plaintext). Bad keys print one message and
  // throw CLI::RuntimeError(kExitBadInput).
  explicit ControlClient(const std::string& endpoint,
                         std::optional<std::string> curve_dir = std::nullopt);
  // The reply, or prints "strata <what>: ..." and throws CLI::RuntimeError.
  control::Reply Call(const char* what, control::Request request,
                      int timeout_ms = 5000);
  // Same, but returns the error instead of exiting.
  StatusOr<control::Reply> TryCall(control::Request request, int timeout_ms);
  const std::string& endpoint() const { return endpoint_; }

 private:
  zmq::context_t ctx_;
  std::string endpoint_;
  control::DealerClient client_;
};

[[noreturn]] void Fail(const std::string& what, int code,
                       const std::string& message);

const char* JobStateName(control::JobState s);
// "running", "exited 0", "signal 9", "failed to start", "pending".
std::string RankStateText(const control::RankReport& r);

}  // namespace strata::cli
