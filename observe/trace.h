// Chrome/Perfetto JSON traces of a job: one process track per rank, a
// thread track for its step sections and one for its collectives, and flow
// arrows that link the ranks' spans of one collective.
//
// Format: the JSON trace event format that Perfetto and chrome://tracing
// load — `{"traceEvents": [...]}` with `ph` "X" (complete, `ts`/`dur` in
// microseconds), "i" (instant), "M" (process and thread names) and
// "s"/"t"/"f" (flow start, step, end bound to the enclosing slice).
//
// Clocks: every timestamp is a wall-clock reading of the node it was taken
// on. Nodes' clocks differ, so each node's offset to the reference clock
// (the coordinator's) is added before writing; EstimateClockOffset() gets it
// from request/reply round trips (NTP's on-wire method, or Cristian's where
// the remote stamped only its answer; the sample with the smallest network
// delay bounds the error by half that delay).
// Timestamps are written relative to the earliest event. Pure.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace strata::observe {

struct TraceRank {
  int rank = 0;
  std::string node;
};

// A step section of one rank (forward, backward, wait, ...).
struct SectionSpan {
  int rank = 0;
  int64_t step = 0;
  std::string section;
  int64_t start_ns = 0;  // node wall clock, ns since the epoch
  int64_t dur_ns = 0;
};

// A collective as one rank's flight recorder saw it.
struct CollectiveSpan {
  int rank = 0;
  std::string group;
  uint64_t seq = 0;
  std::string op;
  uint64_t bytes = 0;
  int64_t entered_ns = 0, started_ns = 0, finished_ns = 0;  // 0: not yet
};

// A point event (a detection, a restart); rank -1 for the whole job.
struct InstantEvent {
  std::string name;
  int rank = -1;
  int64_t ts_ns = 0;  // reference clock
  std::string detail;
};

struct TraceInput {
  std::vector<TraceRank> ranks;
  std::vector<SectionSpan> sections;
  std::vector<CollectiveSpan> collectives;
  std::vector<InstantEvent> instants;
  // ns to add to a node's readings to get the reference clock; absent = 0.
  std::map<std::string, int64_t> node_offset_ns;
};

// The trace as JSON. A collective still running at the end (no finish) is
// drawn up to the last timestamp in the trace, named "<op> (unfinished)".
std::string WriteTrace(const TraceInput& in);

// One clock sample: the local clock before sending, the remote clock when
// it answered, the local clock when the answer arrived (ns); and, when the
// remote also stamped the request's arrival, that reading (0: none).
struct ClockSample {
  int64_t local_send_ns = 0;
  int64_t remote_ns = 0;
  int64_t local_recv_ns = 0;
  int64_t remote_recv_ns = 0;
};

struct ClockOffset {
  int64_t offset_ns = 0;     // add to local readings to get remote time
  int64_t error_bound_ns = 0;  // half the smallest round trip
};

// Over the samples with a non-negative network delay, the one with the
// smallest delay: with both remote stamps NTP's on-wire formula (RFC 5905
// section 8: offset ((t2 - t1) + (t3 - t4)) / 2, delay the round trip minus
// the remote's time between its two stamps), otherwise Cristian's method
// (the remote reading at the middle of the round trip); the error bound is
// half that delay. An empty or all-invalid input gives offset 0 with error
// bound -1.
ClockOffset EstimateClockOffset(const std::vector<ClockSample>& samples);

}  // namespace strata::observe
