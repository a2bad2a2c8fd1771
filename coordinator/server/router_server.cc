#include "coordinator/server/router_server.h"

#include <time.h>
#include <zmq.h>

#include <cerrno>
#include <chrono>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/cpu_time.h"

namespace strata::coordinator {
namespace {

// The sender's IP, where libzmq knows it (TCP peers speaking ZMTP 2+;
// not ipc:// peers, nor bytes taken for ZMTP 1.0 frames).
std::string PeerOf(zmq::message_t& msg) {
  const char* address = zmq_msg_gets(msg.handle(), "Peer-Address");
  return address != nullptr ? address : "unknown peer";
}

// Wall time for a loop step (CLOCK_MONOTONIC: what a queued request waits;
// the service's Clock may be a fake in tests).
double MonotonicSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

}  // namespace

RouterServer::RouterServer(zmq::context_t* context, Service* service,
                           Logger logger,
                           std::optional<control::CurveServerConfig> curve,
                           const RankKeys* ranks)
    : context_(context),
      curve_(std::move(curve)),
      ranks_(ranks),
      socket_(*context, zmq::socket_type::router),
      service_(service),
      logger_(std::move(logger)),
      limiter_(logger_, {}, service->clock()) {
  // Peers sending larger frames are disconnected by libzmq before we read.
  socket_.set(zmq::sockopt::maxmsgsize,
              static_cast<int64_t>(control::kMaxFrameBytes));
  socket_.set(zmq::sockopt::linger, 0);
  socket_.set(zmq::sockopt::router_mandatory, 0);
  // Per connection: what a flooding peer can make the coordinator queue
  // (control/codec.h kControlHwm).
  socket_.set(zmq::sockopt::rcvhwm, control::kControlHwm);
  socket_.set(zmq::sockopt::sndhwm, control::kControlHwm);
  // Connections waiting to be accepted (listen(2)'s backlog; libzmq's
  // default is 100, zmq_setsockopt(3) ZMQ_BACKLOG; the kernel caps it at
  // net.core.somaxconn). Thousands of workers connect at once when they
  // start or when a coordinator restarts; past the backlog the kernel drops
  // their handshakes and each retries after 1, 3, 7, 15, 31 s (tcp(7)
  // tcp_syn_retries). With 16,384 simulated workers the queue was seen full
  // (ss -ltn) on a loaded machine (docs/results.md "Coordinator at scale").
  socket_.set(zmq::sockopt::backlog, kListenBacklog);
}

RouterServer::~RouterServer() {
  monitor_.reset();
  socket_.close();  // before the ZAP handler stops answering
  if (zap_) zap_->Stop();
}

Status RouterServer::StartSecurity() {
  // Order matters: the ZAP handler must answer before the socket accepts
  // anything, or libzmq without ZMQ_ZAP_ENFORCE_DOMAIN lets CURVE clients in
  // unchecked (curve_config.h).
  auto zap = std::make_unique<ZapHandler>(context_, *curve_, logger_, ranks_);
  RETURN_IF_ERROR(zap->Start());
  RETURN_IF_ERROR(control::ConfigureCurveServer(&socket_, *curve_));
  auto monitor =
      std::make_unique<HandshakeMonitor>(context_, &socket_, logger_);
  RETURN_IF_ERROR(monitor->Start());
  zap_ = std::move(zap);
  monitor_ = std::move(monitor);
  logger_->info("CURVE on: {} authorized client key(s), ZAP domain '{}'",
                curve_->authorized.size(), control::kZapDomain);
  return absl::OkStatus();
}

control::RejectCounters RouterServer::rejects() const {
  control::RejectCounters r = rejects_;
  r.unauthenticated =
      (zap_ ? zap_->denied() : 0) + (monitor_ ? monitor_->failures() : 0);
  return r;
}

StatusOr<std::string> RouterServer::Bind(const std::string& endpoint) {
  if (curve_ && !zap_) RETURN_IF_ERROR(StartSecurity());
  try {
    socket_.bind(endpoint);
    return socket_.get(zmq::sockopt::last_endpoint);
  } catch (const zmq::error_t& e) {
    return absl::UnavailableError(
        absl::StrCat("bind ", endpoint, ": ", e.what()));
  }
}

void RouterServer::Run(const std::atomic<bool>& stop, int tick_ms,
                       const std::function<void()>& on_tick) {
  const Clock* clock = service_->clock();
  int64_t last_tick = clock->SteadyNowMs();
  while (!stop.load()) {
    PollOnce(tick_ms);
    const int64_t now = clock->SteadyNowMs();
    if (now - last_tick >= tick_ms) {
      const double wall0 = MonotonicSeconds(), cpu0 = ThreadCpuSeconds();
      service_->NoteLoopGap(now - last_tick);
      service_->Tick();
      if (on_tick) on_tick();
      EndStep(wall0, cpu0, "tick");
      limiter_.Flush();
      last_tick = now;
    }
  }
  limiter_.FlushAll();
}

bool RouterServer::WaitReadable(int timeout_ms) {
  zmq::pollitem_t items[2] = {
      {socket_.handle(), 0, ZMQ_POLLIN, 0},
      {monitor_ ? monitor_->handle() : nullptr, 0, ZMQ_POLLIN, 0}};
  try {
    zmq::poll(items, monitor_ ? 2 : 1, std::chrono::milliseconds(timeout_ms));
  } catch (const zmq::error_t& e) {
    if (e.num() != EINTR) logger_->warn("poll failed: {}", e.what());
    return false;
  }
  if (monitor_ && (items[1].revents & ZMQ_POLLIN) != 0) monitor_->Drain();
  return (items[0].revents & ZMQ_POLLIN) != 0;
}

// A DEALER message arrives as [identity][payload]; anything else is a
// protocol error from the peer (PollOnce rejects it).
std::vector<zmq::message_t> RouterServer::ReceiveFrames() {
  std::vector<zmq::message_t> parts;
  try {
    do {
      zmq::message_t part;
      if (!socket_.recv(part, zmq::recv_flags::dontwait)) break;
      parts.push_back(std::move(part));
    } while (parts.back().more() && parts.size() < 16);
    while (!parts.empty() && parts.back().more()) {  // drain excess frames
      zmq::message_t junk;
      if (!socket_.recv(junk, zmq::recv_flags::dontwait) || !junk.more()) {
        break;
      }
    }
  } catch (const zmq::error_t& e) {
    limiter_.Warn("?", "recv", "recv failed: {}", e.what());
    return {};
  }
  return parts;
}

control::Reply RouterServer::Answer(const std::vector<zmq::message_t>& parts,
                                    const std::string& peer) {
  std::string_view frame(parts[1].data<char>(), parts[1].size());
  uint64_t request_id = 0;
  auto request = control::DecodeRequest(frame, &rejects_, &request_id);
  if (!request.ok()) {
    limiter_.Warn(peer, "bad request",
                  "rejected request from {} ({} rejects so far): {}", peer,
                  rejects_.Total(), std::string(request.status().message()));
    return control::MakeReply(request_id, request.status());
  }
  if (!curve_) {
    control::Reply reply = service_->Handle(*request);
    ++handled_;
    return reply;
  }
  // Who ZAP said this connection is (zap_handler.h).
  const char* user = zmq_msg_gets(parts.back().handle(), "User-Id");
  auto who = ParseZapUserId(user != nullptr ? user : "");
  if (!who.ok()) {
    ++rejects_.malformed;
    return control::MakeReply(
        request_id, absl::PermissionDeniedError(
                        absl::StrCat("no strata identity on this connection: ",
                                     who.status().message())));
  }
  control::Reply reply = service_->Handle(*request, *who);
  ++handled_;
  return reply;
}

void RouterServer::SendReply(zmq::message_t& identity, control::Reply reply,
                             const std::string& peer) {
  const uint64_t reply_id = reply.request_id();
  std::string out = control::EncodeReply(std::move(reply));
  if (out.size() > control::kMaxFrameBytes) {
    // The peer's ZMQ_MAXMSGSIZE would drop it and leave it waiting: say why.
    logger_->warn(
        "reply to request {} is {} bytes, over the {} byte frame "
        "limit; answering ResourceExhausted",
        reply_id, out.size(), control::kMaxFrameBytes);
    out = control::EncodeReply(control::MakeReply(
        reply_id,
        absl::ResourceExhaustedError(absl::StrCat(
            "the reply would be ", out.size(),
            " bytes, more than one control frame (", control::kMaxFrameBytes,
            " bytes); ask for less (one job, fewer events)"))));
  }
  try {
    socket_.send(identity, zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(out), zmq::send_flags::dontwait);
  } catch (const zmq::error_t& e) {
    limiter_.Warn(peer, "send", "send reply to {} failed: {}", peer, e.what());
  }
}

void RouterServer::EndStep(double wall0, double cpu0, const char* what) {
  const double wall = MonotonicSeconds() - wall0;
  const double cpu = ThreadCpuSeconds() - cpu0;
  loop_stats_.Add(wall, cpu);
  if (wall * 1e3 > kSlowStepMs) {
    limiter_.Warn("loop", "slow step",
                  "one {} held the event loop for {:.1f} ms ({:.1f} ms of CPU; "
                  "the rest the thread waited to be scheduled)",
                  what, wall * 1e3, cpu * 1e3);
  }
}

bool RouterServer::PollOnce(int timeout_ms) {
  if (!WaitReadable(timeout_ms)) return false;
  const double wall0 = MonotonicSeconds(), cpu0 = ThreadCpuSeconds();
  struct StepEnd {
    RouterServer* self;
    double wall0, cpu0;
    ~StepEnd() { self->EndStep(wall0, cpu0, "request"); }
  } step_end{this, wall0, cpu0};
  std::vector<zmq::message_t> parts = ReceiveFrames();
  if (parts.empty()) return false;
  const std::string peer = PeerOf(parts.back());
  if (parts.size() != 2) {
    ++rejects_.malformed;
    limiter_.Warn(peer, "malformed message",
                  "rejected message from {} with {} frames (expected "
                  "identity+1)",
                  peer, parts.size());
    return true;
  }
  SendReply(parts[0], Answer(parts, peer), peer);
  return true;
}

}  // namespace strata::coordinator
