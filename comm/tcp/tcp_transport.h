// TCP transport between ranks on different nodes: strata's own sockets,
// non-blocking with poll(), TCP_NODELAY, and several streams per peer for
// large messages (each message above kStripeBytes is cut into one stripe per
// stream, so one flow's congestion window does not cap the pair).
//
// Connection setup goes through a rendezvous Store: each rank listens on an
// ephemeral port of the configured address, publishes "host:port", and the
// higher rank of every pair connects to the lower one.
#pragma once

#include <memory>
#include <string>

#include "comm/store.h"
#include "comm/transport.h"

namespace strata::comm {

struct TcpOptions {
  // IPv4 address or interface name (e.g. "eth1", from the topology) to bind
  // and advertise. Empty = 127.0.0.1.
  std::string bind = "127.0.0.1";
  int streams = 4;                    // sockets per peer
  size_t stripe_threshold = 1 << 20;  // messages >= this use all streams
  std::chrono::milliseconds connect_timeout{std::chrono::seconds(60)};
};

// Connects a full mesh of `size` ranks. Keys are written under `store`
// (wrap it in a PrefixStore per group). DeadlineExceeded names the ranks
// that never showed up.
StatusOr<std::unique_ptr<Transport>> ConnectTcpTransport(
    std::shared_ptr<Store> store, int rank, int size, const TcpOptions& opts);

}  // namespace strata::comm
