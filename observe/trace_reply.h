// What `strata trace` draws from a coordinator's TraceReply
// (docs/observe.md "Traces"): the reply's step reports and flight-recorder
// records as TraceInput for WriteTrace().
//
// A step report says how long each section took, not when: the trace draws
// a "step N" span ending when the step ended (StepReport.end_unix_us, else
// unix_ms) and lasting step_seconds, and inside it the trainer's sections
// one after another in the order a step runs them (data, forward,
// backward, grad_reduce, optimizer, checkpoint, then the rest by name).
// `wait` and `comm` (time inside collectives, which overlaps the sections
// that issue them) and running totals (`*_total`) are not drawn as
// sections: the collectives track shows them, and the step span's args
// carry their seconds. Pure.
#pragma once

#include "observe/trace.h"
#include "proto/control.pb.h"

namespace strata::observe {

// With `align`, each node's readings are moved by its worker's clock
// estimate onto the coordinator's clock; without, they are drawn as taken.
TraceInput TraceInputFromReply(const control::TraceReply& reply, bool align);

}  // namespace strata::observe
