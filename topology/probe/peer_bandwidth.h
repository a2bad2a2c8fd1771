// Measured network bandwidth between two nodes (the worker
// measures bandwidth to peers when asked): one side serves a TCP
// sink, the other streams `bytes` into it and times it until the sink
// acknowledges the last byte. `strata probe --serve-peer PORT` and
// `strata probe --peer HOST:PORT` (or strata-worker --peer) use it; the
// result goes into NodeProbe.peer_gbps, which the coordinator prefers over
// the NIC's nominal rate when it builds the cluster from probes.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace strata::probe {

// Accepts `connections` clients on `port` (0: any; the bound port is
// reported through `on_bound`) and drains each, acknowledging the end.
Status ServePeerSink(int port, int connections,
                     void (*on_bound)(int port) = nullptr);

// Streams `bytes` to HOST:PORT; returns Gb/s. Unavailable when the peer
// cannot be reached within 10 s.
StatusOr<double> MeasurePeerGbps(const std::string& host, int port,
                                 int64_t bytes = int64_t{256} << 20);
// The same for a "HOST:PORT" flag value; InvalidArgument when malformed.
StatusOr<double> MeasurePeerGbps(const std::string& host_port);

}  // namespace strata::probe
