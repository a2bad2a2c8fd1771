// Address and port helpers for rank 0 of strata-exec.
#pragma once

#include <string>

#include "common/status.h"

namespace strata::launch {

// A TCP port that is free on `bind_addr` now (bind to port 0, read it back,
// close). Another process may take it before the user binds it: the same
// small race torchrun's --master-port default has.
StatusOr<int> PickFreePort(const std::string& bind_addr);

// An IPv4 address of this host that other hosts can reach: among the
// addresses of this host's (network namespace's) up, non-loopback
// interfaces, the first one the hostname resolves to, else the first one.
// NotFound when there is none.
StatusOr<std::string> ReachableHostAddress();

}  // namespace strata::launch
