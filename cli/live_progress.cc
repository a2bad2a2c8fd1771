#include "cli/live_progress.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "observe/progress.h"

namespace strata::cli {

bool LiveProgress::Terminal() {
  const char* env = std::getenv("STRATA_PROGRESS");
  if (env != nullptr && std::string_view(env) == "0") return false;
  return isatty(STDOUT_FILENO) == 1 && isatty(STDERR_FILENO) == 1;
}

bool LiveProgress::IsStepLine(std::string_view line) {
  const size_t step = line.find("step=");
  if (step == std::string_view::npos) return false;
  if (step > 0 && line[step - 1] != ' ' && line[step - 1] != ']') return false;
  return line.find(" loss=", step) != std::string_view::npos;
}

void LiveProgress::Clear() {
  if (!drawn_) return;
  std::fputs("\r\033[K", stderr);
  drawn_ = false;
}

void LiveProgress::Output(std::string_view data) {
  if (!live_) {
    std::fwrite(data.data(), 1, data.size(), stdout);
    std::fflush(stdout);
    return;
  }
  partial_.append(data);
  size_t start = 0;
  for (size_t nl; (nl = partial_.find('\n', start)) != std::string::npos;
       start = nl + 1) {
    const std::string_view line(partial_.data() + start, nl - start);
    if (IsStepLine(line)) continue;
    Clear();
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fputc('\n', stdout);
  }
  partial_.erase(0, start);
  std::fflush(stdout);
}

void LiveProgress::Event(const std::string& line) {
  Clear();
  std::fprintf(stderr, "%s\n", line.c_str());
}

void LiveProgress::Status(const control::JobInfo& job) {
  if (!live_ || job.state() != control::RUNNING) return;
  const auto now = std::chrono::duration_cast<std::chrono::milliseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  const std::string text =
      observe::DescribeProgress(observe::ComputeProgress(job, now));
  std::fprintf(stderr, "\r\033[K[strata] %s attempt %d: %s", job.job_id().c_str(),
               job.attempt(), text.c_str());
  std::fflush(stderr);
  drawn_ = true;
}

void LiveProgress::Finish() {
  if (!partial_.empty() && !IsStepLine(partial_)) {
    Clear();
    std::fwrite(partial_.data(), 1, partial_.size(), stdout);
    std::fputc('\n', stdout);
  }
  partial_.clear();
  Clear();
  std::fflush(stdout);
}

}  // namespace strata::cli
