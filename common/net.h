// IPv4 networking helpers shared by the launcher, the runtime, the
// coordinator and the worker: HOST:PORT parsing, name resolution, listening
// sockets, free ports and the address other hosts can reach. IPv4 only
// (every strata transport is). Thread-safe (getaddrinfo is).
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace strata::net {

struct HostPort {
  std::string host;
  int port = 0;
};

// "HOST:PORT", split at the last ':'. InvalidArgument quoting `s` when the
// host is empty or the port is not in 1..65535.
StatusOr<HostPort> ParseHostPort(std::string_view s);

// A dotted quad as is; a name through the resolver (IPv4 only). NotFound
// "'NAME' does not resolve to an IPv4 address: REASON" when it does not;
// callers prefix what the name is (e.g. the variable it came from).
StatusOr<std::string> ResolveIpv4(const std::string& host);

// Whether `ipv4` (dotted quad) is in 127.0.0.0/8.
bool IsLoopback(std::string_view ipv4);

// A listening TCP socket on `bind_addr` (dotted quad) and `port` (0: any),
// close-on-exec, with SO_REUSEADDR. The caller owns and closes the fd.
StatusOr<int> ListenTcp(const std::string& bind_addr, int port, int backlog);

// The local port `fd` is bound to.
StatusOr<int> BoundPort(int fd);

// A TCP port that is free on `bind_addr` now (bind to port 0, read it back,
// close). Another process may take it before the caller binds it: the same
// small race torchrun's --master-port default has.
StatusOr<int> PickFreePort(const std::string& bind_addr = "0.0.0.0");

// An IPv4 address of this host that other hosts can reach: among the
// addresses of this host's (network namespace's) up, non-loopback
// interfaces, the first one the hostname resolves to, else the first one.
// NotFound when there is none.
StatusOr<std::string> ReachableHostAddress();

}  // namespace strata::net
