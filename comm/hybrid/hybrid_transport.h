// Hybrid transport: shared memory to ranks on the same node, TCP to the
// others — what a multi-node job uses so that hierarchical algorithms run
// their intra-node phases over shm and only the inter-node phase over the
// network.
#pragma once

#include <vector>

#include "comm/shm/shm_transport.h"
#include "comm/tcp/tcp_transport.h"

namespace strata::comm {

// `node_of[r]` is rank r's node. Keys go under `store` ("shm/<node>/...",
// "tcp/..."). A SendRecv whose two peers use different transports runs the
// send on a helper thread so both progress.
StatusOr<std::unique_ptr<Transport>> ConnectHybridTransport(
    std::shared_ptr<Store> store, int rank, const std::vector<int>& node_of,
    const TcpOptions& tcp, const ShmOptions& shm);

}  // namespace strata::comm
