#include "runtime/step_timer.h"

#include <zmq.hpp>

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

namespace strata {

// The outbox and its sender thread. The training thread appends under `mu`
// (held for a push_back); the sender swaps the outbox out under it and
// does all the I/O outside it, so the training thread never waits for a
// system call. The sender wakes on its own clock (wait_for), never on a
// notification from the training thread: only the destructor notifies it.
struct StepTimer::Sender {
  explicit Sender(std::atomic<uint64_t>* dropped_count)
      : dropped(dropped_count) {}

  zmq::context_t ctx{1};
  zmq::socket_t sock{ctx, zmq::socket_type::push};
  std::atomic<uint64_t>* dropped;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<control::StepReport> outbox;  // guarded by mu
  bool stop = false;                        // guarded by mu
  std::thread thread;

  void Run() {
    std::vector<control::StepReport> batch;
    std::string bytes;
    for (;;) {
      bool last;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait_for(lock, kSendInterval, [this] { return stop; });
        batch.swap(outbox);
        last = stop;
      }
      for (const control::StepReport& r : batch) {
        bytes.clear();
        r.SerializeToString(&bytes);
        if (!sock.send(zmq::buffer(bytes), zmq::send_flags::dontwait)) {
          dropped->fetch_add(1, std::memory_order_relaxed);
        }
      }
      batch.clear();
      if (last) return;
    }
  }
};

StepTimer::StepTimer(std::string endpoint, std::string job_id, int rank)
    : job_id_(std::move(job_id)),
      rank_(rank),
      step_start_(std::chrono::steady_clock::now()) {
  if (endpoint.empty()) return;
  sender_ = std::make_unique<Sender>(&dropped_);
  // Closing waits at most this long for the last reports to leave.
  sender_->sock.set(zmq::sockopt::linger, 100);
  // A batch is a few reports; a sender that finds the socket queue full
  // (worker gone or stuck) drops the rest.
  sender_->sock.set(zmq::sockopt::sndhwm, 64);
  sender_->sock.connect(endpoint);
  sender_->thread = std::thread([s = sender_.get()] { s->Run(); });
}

StepTimer::~StepTimer() {
  if (sender_ == nullptr) return;
  {
    std::lock_guard<std::mutex> lock(sender_->mu);
    sender_->stop = true;
  }
  sender_->cv.notify_all();
  sender_->thread.join();
}

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

void StepTimer::AddLinks(control::StepReport& r) {
  if (!link_source_) return;
  // peer -> bytes and the longest busy time of its streams.
  std::map<int, std::pair<int64_t, int64_t>> per_peer;
  for (const Link& l : link_source_()) {
    auto& seen = links_seen_[{l.peer, l.stream}];
    const int64_t bytes = l.bytes - seen.first, busy = l.busy_us - seen.second;
    seen = {l.bytes, l.busy_us};
    if (bytes <= 0 || busy < 0) continue;  // idle, or a new connection
    auto& p = per_peer[l.peer];
    p.first += bytes;
    p.second = std::max(p.second, busy);
  }
  for (const auto& [peer, g] : per_peer) {
    control::LinkSample* s = r.add_links();
    s->set_peer_rank(peer);
    s->set_bytes(g.first);
    s->set_busy_seconds(g.second / 1e6);
  }
}

void StepTimer::EndStep(int64_t step, int64_t tokens, double loss) {
  const auto now = std::chrono::steady_clock::now();
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
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
  r.set_checkpoint_step(checkpoint_step_);
  r.set_in_place(in_place_);
  r.set_generation(generation_);
  AddLinks(r);
  r.set_unix_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(wall).count());
  r.set_end_unix_us(
      std::chrono::duration_cast<std::chrono::microseconds>(wall).count());
  sections_.clear();
  step_start_ = now;
  in_phase_ = false;
  last_ = r;
  Send(std::move(r));
}

void StepTimer::BeginPhase(const std::string& name, double deadline_seconds) {
  control::StepReport r = PhaseReport();
  r.set_phase(name);
  r.set_phase_deadline_ms(
      deadline_seconds > 0 ? static_cast<int64_t>(deadline_seconds * 1000) : 0);
  in_phase_ = true;
  Send(std::move(r));
}

void StepTimer::EndPhase(bool restart_step_clock) {
  if (!in_phase_) return;
  control::StepReport r = PhaseReport();
  r.set_phase_end(true);
  in_phase_ = false;
  // The next step's time runs from here: the phase is not part of it.
  if (restart_step_clock) step_start_ = std::chrono::steady_clock::now();
  Send(std::move(r));
}

control::StepReport StepTimer::PhaseReport() const {
  const auto wall = std::chrono::system_clock::now().time_since_epoch();
  control::StepReport r;
  r.set_job_id(job_id_);
  r.set_rank(rank_);
  r.set_step(last_.step());
  r.set_total_steps(total_steps_);
  r.set_checkpoint_step(checkpoint_step_);
  r.set_in_place(in_place_);
  r.set_generation(generation_);
  r.set_unix_ms(
      std::chrono::duration_cast<std::chrono::milliseconds>(wall).count());
  return r;
}

void StepTimer::Send(control::StepReport r) {
  if (sender_ == nullptr) return;
  std::lock_guard<std::mutex> lock(sender_->mu);
  if (sender_->outbox.size() >= kMaxOutbox) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  sender_->outbox.push_back(std::move(r));
}

}  // namespace strata
