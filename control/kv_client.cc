#include "control/kv_client.h"

#include <algorithm>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/mutex.h"
#include "control/dealer_client.h"

namespace strata::control {
namespace {

class CoordinatorStore : public comm::Store {
 public:
  CoordinatorStore(const std::string& endpoint, Duration rpc_timeout,
                   const std::optional<CurveClientConfig>& curve)
      : client_(&ctx_, endpoint, curve), rpc_timeout_(rpc_timeout) {}

  Status Set(const std::string& key, const std::string& value) override {
    control::Request req;
    req.mutable_kv_set()->set_key(key);
    req.mutable_kv_set()->set_value(value);
    return Call(req).status();
  }

  StatusOr<std::string> Get(const std::string& key, Duration timeout) override {
    RETURN_IF_ERROR(Wait({key}, timeout));
    control::Request req;
    req.mutable_kv_get()->set_key(key);
    ASSIGN_OR_RETURN(control::Reply reply, Call(req));
    return reply.kv().value();
  }

  StatusOr<int64_t> Add(const std::string& key, int64_t delta) override {
    control::Request req;
    req.mutable_kv_add()->set_key(key);
    req.mutable_kv_add()->set_delta(delta);
    ASSIGN_OR_RETURN(control::Reply reply, Call(req));
    return reply.kv().counter();
  }

  Status Wait(const std::vector<std::string>& keys, Duration timeout) override {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    auto backoff = std::chrono::milliseconds(2);
    control::Request req;
    for (const auto& k : keys) req.mutable_kv_wait()->add_keys(k);
    while (true) {
      ASSIGN_OR_RETURN(control::Reply reply, Call(req));
      if (reply.kv().missing().empty()) return absl::OkStatus();
      if (std::chrono::steady_clock::now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "coordinator store: keys not set after ", timeout.count(),
            " ms: ", absl::StrJoin(reply.kv().missing(), ", ")));
      }
      std::this_thread::sleep_for(backoff);
      backoff = std::min(backoff * 2, std::chrono::milliseconds(50));
    }
  }

  StatusOr<bool> Check(const std::string& key) override {
    control::Request req;
    req.mutable_kv_wait()->add_keys(key);
    ASSIGN_OR_RETURN(control::Reply reply, Call(req));
    return reply.kv().missing().empty();
  }

  Status Delete(const std::string& key) override {
    control::Request req;
    req.mutable_kv_delete()->set_key(key);
    return Call(req).status();
  }

 private:
  StatusOr<control::Reply> Call(const control::Request& req) {
    MutexLock lock(mu_);
    auto reply = client_.Call(req, static_cast<int>(rpc_timeout_.count()));
    if (absl::IsDeadlineExceeded(reply.status())) {
      return absl::UnavailableError(absl::StrCat(
          "coordinator store unreachable: ", reply.status().message()));
    }
    return reply;
  }

  zmq::context_t ctx_;
  Mutex mu_;
  DealerClient client_ ABSL_GUARDED_BY(mu_);  // one call at a time
  Duration rpc_timeout_;
};

}  // namespace

StatusOr<std::shared_ptr<comm::Store>> ConnectCoordinatorStore(
    const std::string& endpoint, std::chrono::milliseconds rpc_timeout) {
  std::string ep = endpoint;
  if (ep.starts_with("strata://")) ep = "tcp://" + ep.substr(9);
  if (!ep.starts_with("tcp://") && !ep.starts_with("ipc://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator store endpoint '", endpoint,
                     "' must be strata://HOST:PORT or tcp://HOST:PORT"));
  }
  // Ranks of a CURVE cluster get the worker's curve dir in the environment.
  ASSIGN_OR_RETURN(auto curve, CurveClientConfigFromFlagOrEnv(""));
  return std::shared_ptr<comm::Store>(
      std::make_shared<CoordinatorStore>(ep, rpc_timeout, curve));
}

}  // namespace strata::control
