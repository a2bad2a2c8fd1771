// comm::Store over the coordinator's rendezvous KV (STRATA_STORE=
// strata://HOST:PORT): what ranks started by strata workers use to find each
// other. Get and Wait poll KvWait with a backoff from 2 ms to 50 ms until
// the keys exist or the timeout passes (DeadlineExceeded naming the missing
// keys); an unreachable coordinator gives Unavailable after `rpc_timeout`.
// Thread-safe (one DEALER socket behind a mutex).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "comm/store.h"
#include "common/status.h"

namespace strata::coordinator {

// `endpoint` is "tcp://HOST:PORT" or "strata://HOST:PORT".
StatusOr<std::shared_ptr<comm::Store>> ConnectCoordinatorStore(
    const std::string& endpoint,
    std::chrono::milliseconds rpc_timeout = std::chrono::seconds(10));

}  // namespace strata::coordinator
