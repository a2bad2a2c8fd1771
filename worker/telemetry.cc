#include "worker/telemetry.h"

#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "comm/flight_recorder.h"
#include "worker/flight_reader.h"

namespace strata::worker {
namespace {

constexpr int64_t kMaxFrameBytes = 64 << 10;
// Reports queued per rank (ZMQ_RCVHWM; libzmq's default is 1000): a rank
// reports once per step and the worker drains every 10 ms, so 100 is a
// second of 100 steps/s, and a rank flooding reports holds at most
// 100 x 64 KiB = 6.4 MiB of the worker. Ranks send with ZMQ_DONTWAIT
// (runtime/step_timer.cc): at the bound their reports are dropped, never
// their steps blocked.
constexpr int kTelemetryHwm = 100;
constexpr size_t kMaxLogged = 1024;

// libzmq's "Peer-Address" of an ipc connection ends in ":uid:gid:pid"
// (SO_PEERCRED at accept time); false when it does not.
bool ParseCredentials(const char* address, pid_t* pid, uid_t* uid) {
  if (address == nullptr) return false;
  std::vector<std::string> parts = absl::StrSplit(address, ':');
  if (parts.size() < 4) return false;
  const size_t n = parts.size();
  uint32_t u = 0;
  int32_t p = 0;
  if (!absl::SimpleAtoi(parts[n - 3], &u) ||
      !absl::SimpleAtoi(parts[n - 1], &p) || p <= 0) {
    return false;
  }
  *uid = u;
  *pid = p;
  return true;
}

// The parent of `pid` from /proc/<pid>/status; 0 if unknown.
pid_t ParentOf(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("PPid:", 0) != 0) continue;
    int32_t ppid = 0;
    return absl::SimpleAtoi(absl::StripAsciiWhitespace(line.substr(5)), &ppid)
               ? ppid
               : 0;
  }
  return 0;
}

}  // namespace

TelemetrySink::TelemetrySink(zmq::context_t* context)
    : socket_(*context, zmq::socket_type::pull),
      logger_(GetLogger("WORKER")) {
  socket_.set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::rcvhwm, kTelemetryHwm);
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

const control::RankReport* TelemetrySink::RankOf(
    pid_t pid, const std::vector<control::RankReport>& ranks) const {
  for (int hop = 0; pid > 1 && hop <= kMaxLineage; ++hop) {
    // A running rank first; then one that just exited (its last reports
    // may still be queued) while the worker holds its attempt.
    for (bool running : {true, false}) {
      for (const control::RankReport& r : ranks) {
        if (r.pid() == pid &&
            (!running || r.state() == control::RANK_RUNNING)) {
          return &r;
        }
      }
    }
    pid = ParentOf(pid);
  }
  return nullptr;
}

void TelemetrySink::Refuse(const Peer& peer, const control::StepReport& claimed,
                           const std::string& why) {
  ++dropped_;
  ++refused_;
  last_refusal_ = absl::StrCat("refused a step report from pid ", peer.pid,
                               " (uid ", peer.uid, ") claiming job '",
                               claimed.job_id(), "' rank ", claimed.rank(),
                               ": ", why);
  if (logged_.size() >= kMaxLogged) logged_.clear();
  if (logged_.insert({peer.pid, claimed.job_id(), claimed.rank()}).second) {
    logger_->warn("telemetry: {}", last_refusal_);
  }
}

void TelemetrySink::Drain() {
  const std::vector<control::RankReport> ranks =
      ranks_ != nullptr ? ranks_->Reports() : std::vector<control::RankReport>{};
  for (int i = 0; i < 10000; ++i) {
    zmq::message_t msg;
    auto got = socket_.recv(msg, zmq::recv_flags::dontwait);
    if (!got) return;
    control::StepReport report;
    if (msg.more() || !report.ParseFromArray(msg.data(), msg.size())) {
      ++dropped_;
      continue;
    }
    Peer peer;
    const char* address = nullptr;
    try {
      address = msg.gets("Peer-Address");
    } catch (const zmq::error_t&) {
      address = nullptr;
    }
    if (!ParseCredentials(address, &peer.pid, &peer.uid)) {
      Refuse(peer, report, "no peer credentials on the connection");
      continue;
    }
    const control::RankReport* rank = RankOf(peer.pid, ranks);
    if (rank == nullptr) {
      Refuse(peer, report, "the pid is not a rank this worker started");
      continue;
    }
    if (report.job_id() != rank->job_id() || report.rank() != rank->rank()) {
      Refuse(peer, report,
             absl::StrCat("it is rank ", rank->rank(), " of job '",
                          rank->job_id(), "' attempt ", rank->attempt()));
      continue;
    }
    Queue& queue = changed_[{rank->job_id(), rank->rank()}];
    queue.peer = peer;
    queue.reports.push_back(std::move(report));
    if (queue.reports.size() > static_cast<size_t>(kMaxQueuedSteps)) {
      queue.reports.pop_front();
      ++dropped_;
    }
  }
}

void TelemetrySink::AttachRecord(const Peer& peer,
                                 std::deque<control::StepReport>& q) {
  if (q.empty()) return;
  const control::StepReport& last = q.back();
  auto share = ReadRecordedShare(last.job_id(), last.rank(), peer.pid,
                                 comm::WallNowNs(), kRecordWindowNs);
  for (control::StepReport& r : q) {
    // Whatever the rank claimed here is not the worker's reading.
    r.clear_recorded_ops();
    r.clear_recorded_share();
    if (share.ok() && share->ops > 0) {
      r.set_recorded_ops(share->ops);
      r.set_recorded_share(share->share);
    }
  }
}

std::vector<control::StepReport> TelemetrySink::TakeChanged() {
  Drain();
  std::vector<control::StepReport> out;
  for (auto& [key, queue] : changed_) {
    AttachRecord(queue.peer, queue.reports);
    for (auto& report : queue.reports) out.push_back(std::move(report));
  }
  changed_.clear();
  return out;
}

}  // namespace strata::worker
