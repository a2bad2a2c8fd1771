#include "runtime/step_timer.h"

#include <zmq.hpp>

namespace strata {

struct StepTimer::Socket {
  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::push};
};

StepTimer::StepTimer(std::string endpoint, std::string job_id, int rank)
    : job_id_(std::move(job_id)),
      rank_(rank),
      step_start_(std::chrono::steady_clock::now()) {
  if (endpoint.empty()) return;
  socket_ = std::make_unique<Socket>();
  socket_->sock.set(zmq::sockopt::linger, 0);
  socket_->sock.set(zmq::sockopt::sndhwm, 16);
  socket_->sock.connect(endpoint);
}

StepTimer::~StepTimer() = default;

void StepTimer::Add(const std::string& name, double seconds) {
  sections_[name] += seconds;
}

StepTimer::Scope::Scope(StepTimer& t, std::string name)
    : t_(t), name_(std::move(name)), start_(std::chrono::steady_clock::now()) {}

StepTimer::Scope::~Scope() {
  t_.Add(name_, std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - start_)
                    .count());
}

void StepTimer::SetCommSource(CommSource source) {
  comm_source_ = std::move(source);
  if (comm_source_) comm_seen_ = comm_source_();
}

void StepTimer::EndStep(int64_t step, int64_t tokens, double loss) {
  const auto now = std::chrono::steady_clock::now();
  if (comm_source_) {
    const auto [wait, comm] = comm_source_();
    sections_["wait"] += wait - comm_seen_.first;
    sections_["comm"] += comm - comm_seen_.second;
    comm_seen_ = {wait, comm};
  }
  control::StepReport r;
  r.set_job_id(job_id_);
  r.set_rank(rank_);
  r.set_step(step);
  r.set_step_seconds(std::chrono::duration<double>(now - step_start_).count());
  for (const auto& [k, v] : sections_) (*r.mutable_section_seconds())[k] = v;
  r.set_tokens(tokens);
  r.set_loss(loss);
  r.set_total_steps(total_steps_);
  r.set_unix_ms(std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count());
  sections_.clear();
  step_start_ = now;
  if (socket_ != nullptr) {
    std::string bytes = r.SerializeAsString();
    if (!socket_->sock.send(zmq::buffer(bytes), zmq::send_flags::dontwait)) {
      ++dropped_;
    }
  }
  last_ = std::move(r);
}

}  // namespace strata
