// Injected time source (STYLE.md "Concurrency and time"). Managers and event
// loops read time only through a Clock, so unit tests step a FakeClock
// instead of sleeping. The one clock abstraction of the code base.
//
// Two readings:
// - NowMs(): wall time, for what is recorded (events, job times); it can
//   jump when the system time is set.
// - SteadyNowMs(): monotonic time, for deadlines, periods and timeouts; it
//   never goes backwards. Its origin is unspecified: only differences mean
//   something.
// Both are in milliseconds. Implementations are thread-safe unless they say
// otherwise.
#pragma once

#include <chrono>
#include <cstdint>

namespace strata {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch (wall time; recorded in events).
  virtual int64_t NowMs() const = 0;
  // Milliseconds on a monotonic clock (deadlines and periods).
  virtual int64_t SteadyNowMs() const = 0;
  // Wall time in microseconds, where finer than NowMs() matters (clock
  // offsets between nodes, docs/observe.md "Traces").
  virtual int64_t NowUs() const { return NowMs() * 1000; }
};

class SystemClock : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
  int64_t SteadyNowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  int64_t NowUs() const override {
    return std::chrono::duration_cast<std::chrono::microseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// Test clock: time moves only when Advance() is called, and both readings
// move together, unless AdvanceWall() set the wall clock apart (a system
// time change). Not thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_ + wall_offset_ms_; }
  int64_t SteadyNowMs() const override { return now_ms_; }
  // REQUIRES: ms >= 0.
  void Advance(int64_t ms) { now_ms_ += ms; }
  // Moves the wall reading only (either way), as setting the date does.
  void AdvanceWall(int64_t ms) { wall_offset_ms_ += ms; }

 private:
  int64_t now_ms_;
  int64_t wall_offset_ms_ = 0;
};

}  // namespace strata
