// Injected time source (STYLE.md "Concurrency and time"). Managers read time
// only through a Clock so unit tests step a FakeClock instead of sleeping.
#pragma once

#include <chrono>
#include <cstdint>

namespace strata {

class Clock {
 public:
  virtual ~Clock() = default;
  // Milliseconds since the Unix epoch (wall time; recorded in events).
  virtual int64_t NowMs() const = 0;
};

class SystemClock : public Clock {
 public:
  int64_t NowMs() const override {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  }
};

// Test clock: time moves only when Advance() is called. Not thread-safe.
class FakeClock : public Clock {
 public:
  explicit FakeClock(int64_t start_ms = 1'000'000) : now_ms_(start_ms) {}
  int64_t NowMs() const override { return now_ms_; }
  void Advance(int64_t ms) { now_ms_ += ms; }

 private:
  int64_t now_ms_;
};

}  // namespace strata
