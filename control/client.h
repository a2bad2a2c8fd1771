// What a control-protocol caller needs of its connection to the
// coordinator: send one Request, get its Reply or a Status. DealerClient is
// the ZeroMQ implementation; unit tests of callers (the worker agent) use a
// fake that answers from a script.
#pragma once

#include "common/status.h"
#include "proto/control.pb.h"

namespace strata::control {

class Client {
 public:
  virtual ~Client() = default;

  // Sends `request` and waits up to `timeout_ms` for its reply. Returns
  // DeadlineExceeded when none came in time, Unavailable when the request
  // could not be sent, the reply's status if it is not OK, else the reply.
  // Blocks the calling thread; not thread-safe unless an implementation
  // says so.
  virtual StatusOr<Reply> Call(Request request, int timeout_ms) = 0;
};

}  // namespace strata::control
