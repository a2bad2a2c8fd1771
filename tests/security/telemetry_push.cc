// Test helper of telemetry_peer_test: a "rank" that pushes one StepReport
// for the job and rank it names (its own or a forged one) to
// $STRATA_TELEMETRY, claiming arrival evidence the worker must replace,
// then stays alive SLEEP_MS (so the worker can check its lineage).
// Usage: telemetry_push JOB RANK STEP [SLEEP_MS]
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <zmq.hpp>

#include "proto/control.pb.h"

int main(int argc, char** argv) {
  const char* ep = std::getenv("STRATA_TELEMETRY");
  if (argc < 4 || ep == nullptr) {
    std::fprintf(stderr, "usage: telemetry_push JOB RANK STEP [SLEEP_MS] "
                         "with STRATA_TELEMETRY set\n");
    return 2;
  }
  strata::control::StepReport s;
  s.set_job_id(argv[1]);
  s.set_rank(std::atoi(argv[2]));
  s.set_step(std::atoll(argv[3]));
  s.set_step_seconds(0.1);
  s.set_recorded_ops(99);
  s.set_recorded_share(0.9);
  zmq::context_t ctx;
  zmq::socket_t push(ctx, zmq::socket_type::push);
  push.set(zmq::sockopt::linger, 2000);
  push.connect(ep);
  const std::string bytes = s.SerializeAsString();
  push.send(zmq::buffer(bytes), zmq::send_flags::none);
  std::printf("pid %d pushed job %s rank %s step %s\n", getpid(), argv[1],
              argv[2], argv[3]);
  std::fflush(stdout);
  const int sleep_ms = argc > 4 ? std::atoi(argv[4]) : 3000;
  std::this_thread::sleep_for(std::chrono::milliseconds(sleep_ms));
  return 0;
}
