// What `strata run` and `strata submit --wait --follow` print while a job
// runs (docs/observe.md "Progress"). On a terminal (stdout and stderr both
// TTYs, and STRATA_PROGRESS not "0"), the ranks' per-step lines
// ("... step=N ... loss=...", strata-train's and the convention of most
// trainers) are replaced by one live progress line on stderr, redrawn at
// every status poll; every other line of output and every event passes
// through above it. The full output stays in `strata logs`. Off a
// terminal everything is printed as it comes. Single thread.
#pragma once

#include <string>
#include <string_view>

#include "proto/control.pb.h"

namespace strata::cli {

class LiveProgress {
 public:
  // `live` decides; Terminal() is what WaitForJob passes.
  explicit LiveProgress(bool live) : live_(live) {}
  static bool Terminal();

  // Relayed job output (any chunking).
  void Output(std::string_view data);
  // One event line for stderr (without its newline).
  void Event(const std::string& line);
  // Redraws the progress line from a status poll of a running job.
  void Status(const control::JobInfo& job);
  // Clears the progress line before the final lines.
  void Finish();

  // Whether `line` is a per-step line the live line replaces.
  static bool IsStepLine(std::string_view line);

 private:
  void Clear();
  bool live_;
  bool drawn_ = false;  // a progress line is on the screen
  std::string partial_;  // output after the last newline
};

}  // namespace strata::cli
