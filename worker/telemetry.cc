#include "worker/telemetry.h"

#include "absl/strings/str_cat.h"

namespace strata::worker {
namespace {
constexpr int64_t kMaxFrameBytes = 64 << 10;
}

TelemetrySink::TelemetrySink(zmq::context_t* context)
    : socket_(*context, zmq::socket_type::pull) {
  socket_.set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
  socket_.set(zmq::sockopt::linger, 0);
}

Status TelemetrySink::Bind(const std::string& endpoint) {
  try {
    socket_.bind(endpoint);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(
        absl::StrCat("telemetry: cannot bind ", endpoint, ": ", e.what()));
  }
  return absl::OkStatus();
}

void TelemetrySink::Drain() {
  for (int i = 0; i < 10000; ++i) {
    zmq::message_t msg;
    auto got = socket_.recv(msg, zmq::recv_flags::dontwait);
    if (!got) return;
    control::StepReport report;
    if (msg.more() || !report.ParseFromArray(msg.data(), msg.size())) {
      ++dropped_;
      continue;
    }
    auto& queue = changed_[{report.job_id(), report.rank()}];
    queue.push_back(std::move(report));
    if (queue.size() > static_cast<size_t>(kMaxQueuedSteps)) {
      queue.pop_front();
      ++dropped_;
    }
  }
}

std::vector<control::StepReport> TelemetrySink::TakeChanged() {
  Drain();
  std::vector<control::StepReport> out;
  for (auto& [key, queue] : changed_) {
    for (auto& report : queue) out.push_back(std::move(report));
  }
  changed_.clear();
  return out;
}

}  // namespace strata::worker
