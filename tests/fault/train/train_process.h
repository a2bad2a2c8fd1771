// strata-train as a real process for the fault tests: run with an
// environment and a hard time limit, output and wall time captured.
// STRATA_TRAIN overrides the binary (to run a test against another build).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>

#include "tests/integration/cli/run_command.h"

namespace strata::testing {

struct TrainRun {
  int code = -1;  // 124: killed by the time limit
  std::string out;
  double seconds = 0;
};

// `env` is "K=V K=V"; the process gets `limit_s` seconds, then SIGTERM.
inline TrainRun RunTrainFor(const std::string& args, const std::string& env,
                            int limit_s) {
  const auto t0 = std::chrono::steady_clock::now();
  RunResult r =
      RunCommand("env " + env + " timeout " + std::to_string(limit_s) + " " +
                 TrainBinary() + " " + args);
  TrainRun out;
  out.code = r.code;
  out.out = std::move(r.out);
  out.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  return out;
}

// A loopback port nothing listens on (bound, then closed).
inline int UnusedPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa));
  socklen_t len = sizeof(sa);
  getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  close(fd);
  return ntohs(sa.sin_port);
}

}  // namespace strata::testing
