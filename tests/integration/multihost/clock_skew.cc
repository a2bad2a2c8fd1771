// LD_PRELOAD library that sets a process's wall clock off by
// $STRATA_TEST_CLOCK_SKEW_MS milliseconds (may be negative): a node whose
// clock is wrong, for tests of clock alignment (trace_test.sh). It wraps
// clock_gettime for the wall clocks (CLOCK_REALTIME and its coarse
// variant), gettimeofday and time; monotonic clocks are untouched, as an
// offset wall clock leaves them. Children inherit it with LD_PRELOAD in
// their environment (a worker's ranks). libfaketime does the same for
// whole test suites; Debian's archive here does not carry it.
#include <dlfcn.h>
#include <sys/time.h>
#include <time.h>

#include <cstdlib>

namespace {

int64_t SkewNs() {
  static const int64_t skew = [] {
    const char* v = std::getenv("STRATA_TEST_CLOCK_SKEW_MS");
    return v == nullptr ? 0 : std::atoll(v) * 1000000LL;
  }();
  return skew;
}

using ClockGettime = int (*)(clockid_t, struct timespec*);

ClockGettime Real() {
  static const auto real =
      reinterpret_cast<ClockGettime>(dlsym(RTLD_NEXT, "clock_gettime"));
  return real;
}

void Shift(struct timespec* ts) {
  int64_t ns = ts->tv_sec * 1000000000LL + ts->tv_nsec + SkewNs();
  ts->tv_sec = ns / 1000000000LL;
  ts->tv_nsec = ns % 1000000000LL;
  if (ts->tv_nsec < 0) {
    ts->tv_nsec += 1000000000LL;
    ts->tv_sec -= 1;
  }
}

}  // namespace

extern "C" int clock_gettime(clockid_t id, struct timespec* ts) {
  const int rc = Real()(id, ts);
  if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE)) {
    Shift(ts);
  }
  return rc;
}

extern "C" int gettimeofday(struct timeval* tv, void* /*tz*/) {
  struct timespec ts;
  const int rc = clock_gettime(CLOCK_REALTIME, &ts);
  if (rc == 0 && tv != nullptr) {
    tv->tv_sec = ts.tv_sec;
    tv->tv_usec = ts.tv_nsec / 1000;
  }
  return rc;
}

extern "C" time_t time(time_t* out) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  if (out != nullptr) *out = ts.tv_sec;
  return ts.tv_sec;
}
