// comm::Store over the coordinator's rendezvous KV (STRATA_STORE=
// strata://HOST:PORT): what ranks started by strata workers use to find each
// other. Get and Wait poll KvWait with a backoff from 2 ms to 50 ms until
// the keys exist or the timeout passes (DeadlineExceeded naming the missing
// keys); an unreachable coordinator gives Unavailable after `rpc_timeout`.
// With $STRATA_CURVE_DIR set (workers pass theirs to ranks) the socket is a
// CURVE client of that dir's keys (security/curve_config.h); a bad dir is
// returned as the error of ConnectCoordinatorStore.
// Thread-safe (one DEALER socket behind a mutex).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/store.h"
#include "common/status.h"

namespace strata::control {

// `endpoint` is "tcp://HOST:PORT" or "strata://HOST:PORT".
StatusOr<std::shared_ptr<comm::Store>> ConnectCoordinatorStore(
    const std::string& endpoint,
    std::chrono::milliseconds rpc_timeout = std::chrono::seconds(10));

}  // namespace strata::control
