// Small helpers over BSD sockets for the TCP transport and the TCP store.
#pragma once

#include <string>

#include "common/status.h"

namespace strata::comm::tcp {

// Resolves an IPv4 address or an interface name to a dotted address.
StatusOr<std::string> ResolveBindAddress(const std::string& addr_or_iface);
// Listening socket on addr:port (port 0 = ephemeral); returns fd and port.
StatusOr<std::pair<int, int>> Listen(const std::string& addr, int port);
// Blocking connect with retries until `timeout_ms` (the listener may not be
// up yet). Returns a connected fd.
StatusOr<int> Connect(const std::string& host, int port, int timeout_ms);
// Blocking full read/write with a poll() timeout; Unavailable on EOF/reset.
Status WriteAll(int fd, const void* data, size_t n, int timeout_ms);
Status ReadAll(int fd, void* data, size_t n, int timeout_ms);
void SetNonBlocking(int fd, bool on);
void SetNoDelay(int fd);
// The connected peer's dotted IPv4 address, for messages; "unknown peer"
// if it cannot be had (not IPv4, already disconnected).
std::string PeerAddress(int fd);

}  // namespace strata::comm::tcp
