#include "coordinator/security/zap_handler.h"

#include <zmq.h>

#include <cerrno>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace strata::coordinator {
namespace {

constexpr size_t kMaxZapFrames = 16;
constexpr auto kReloadPeriod = std::chrono::seconds(1);

ZapDecision Deny(std::string reason, std::string key_z85 = "") {
  return {false, "400", std::move(reason), "", std::move(key_z85)};
}

std::string EncodeZ85(const std::string& raw) {
  char out[control::kZ85KeyChars + 1] = {0};
  zmq_z85_encode(out, reinterpret_cast<const uint8_t*>(raw.data()), 32);
  return out;
}

}  // namespace

AllowList MakeAllowList(const std::vector<control::AuthorizedKey>& keys) {
  AllowList list;
  for (const auto& k : keys) {
    Identity who;
    if (k.role == control::kRoleWorker) {
      who.role = Role::kWorker;
      who.name = k.node;
    } else {
      who.role = k.role == control::kRoleUser ? Role::kUser : Role::kAdmin;
      who.name = k.name;
    }
    list.emplace(control::DecodeZ85Key(k.public_key), ZapUserId(who));
  }
  return list;
}

StatusOr<ZapRequest> ParseZapRequest(const std::vector<std::string>& frames) {
  // RFC 27: version, request id, domain, address, identity, mechanism,
  // then zero or more credential frames.
  if (frames.size() < 6) {
    return absl::InvalidArgumentError(
        absl::StrCat("ZAP request with ", frames.size(),
                     " frames; at least 6 expected (RFC 27)"));
  }
  ZapRequest r{frames[0], frames[1], frames[2], frames[3],
               frames[4], frames[5], {}};
  r.credentials.assign(frames.begin() + 6, frames.end());
  return r;
}

ZapDecision DecideZap(const ZapRequest& request, const AllowList& allowed,
                      const RankKeys* ranks) {
  if (request.version != "1.0") {
    return Deny(absl::StrCat("unsupported ZAP version '", request.version,
                             "' (RFC 27 is 1.0)"));
  }
  if (request.domain != control::kZapDomain) {
    return Deny(absl::StrCat("ZAP domain '", request.domain,
                             "' is not served (expected '", control::kZapDomain,
                             "')"));
  }
  if (request.mechanism != "CURVE") {
    return Deny(absl::StrCat("mechanism ", request.mechanism,
                             " refused: this coordinator requires CURVE"));
  }
  // RFC 27 "CURVE": one credential frame, the 32-byte long-term public key.
  if (request.credentials.size() != 1 || request.credentials[0].size() != 32) {
    return Deny("malformed CURVE credentials (want one 32-byte public key)");
  }
  const std::string z85 = EncodeZ85(request.credentials[0]);
  auto it = allowed.find(request.credentials[0]);
  if (it == allowed.end() && ranks != nullptr) {
    if (auto rank = ranks->Find(request.credentials[0])) {
      return {true, "200", "OK", ZapUserId(*rank), z85};
    }
  }
  if (it == allowed.end()) {
    return Deny(absl::StrCat("client key ", z85, " is not authorized"), z85);
  }
  return {true, "200", "OK", it->second, z85};
}

ZapHandler::ZapHandler(zmq::context_t* context,
                       const control::CurveServerConfig& config, Logger logger,
                       const RankKeys* ranks)
    : socket_(*context, zmq::socket_type::rep),
      logger_(std::move(logger)),
      limiter_(logger_),
      authorized_path_(config.authorized_path),
      allowed_keys_(MakeAllowList(config.authorized)),
      ranks_(ranks) {
  socket_.set(zmq::sockopt::linger, 0);
}

ZapHandler::~ZapHandler() { Stop(); }

Status ZapHandler::Start() {
  try {
    socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    if (e.num() == EADDRINUSE) {
      return absl::AlreadyExistsError(
          absl::StrCat("another ZAP handler is bound in this zmq context (",
                       kZapEndpoint, "); use one CURVE server per context"));
    }
    return absl::InternalError(
        absl::StrCat("bind ", kZapEndpoint, ": ", e.what()));
  }
  // The thread takes the socket over; thread creation is the memory barrier
  // libzmq requires to migrate a socket.
  thread_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void ZapHandler::Stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ZapHandler::Loop() {
  while (!stop_.load()) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      zmq::poll(&item, 1, std::chrono::milliseconds(100));
      if ((item.revents & ZMQ_POLLIN) != 0) HandleOne();
      limiter_.Flush();  // summaries of floods that stopped
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) break;
      if (e.num() != EINTR) logger_->error("ZAP handler: {}", e.what());
    }
  }
  socket_.close();
}

ZapDecision ZapHandler::Decide(const ZapRequest& request) {
  ZapDecision d = DecideZap(request, allowed_keys_, ranks_);
  const auto now = std::chrono::steady_clock::now();
  if (d.allowed || d.key_z85.empty() || authorized_path_.empty() ||
      now - last_reload_ < kReloadPeriod) {
    return d;
  }
  // An unknown key: maybe it was authorized since we last read the list.
  last_reload_ = now;
  auto keys = control::ReadAuthorizedKeys(authorized_path_);
  if (!keys.ok()) {
    // E.g. the list became group/world-writable or foreign-owned: a key
    // planted there must not get in. Logged when the reason changes.
    std::string why(keys.status().message());
    if (why != reload_error_) {
      logger_->error("ZAP: keeping the last good allow-list; refusing {}: {}",
                     authorized_path_, why);
      reload_error_ = why;
    }
    return d;
  }
  reload_error_.clear();
  if (!keys->empty()) allowed_keys_ = MakeAllowList(*keys);
  return DecideZap(request, allowed_keys_, ranks_);
}

void ZapHandler::HandleOne() {
  std::vector<std::string> frames;
  zmq::message_t part;
  do {
    if (!socket_.recv(part, zmq::recv_flags::dontwait)) break;
    if (frames.size() < kMaxZapFrames) frames.push_back(part.to_string());
  } while (part.more());
  if (frames.empty()) return;

  ZapDecision d;
  std::string address;
  auto request = ParseZapRequest(frames);
  if (!request.ok()) {
    d = Deny(std::string(request.status().message()));
  } else {
    address = request->address;
    d = Decide(*request);
  }
  if (d.allowed) {
    ++allowed_;
    logger_->debug("ZAP: accepted CURVE client '{}' from {}", d.user_id,
                   address);
  } else {
    ++denied_;
    limiter_.Warn(address.empty() ? "?" : address, d.status_text,
                  "ZAP: denied connection from {}: {} ({} unauthenticated so "
                  "far)",
                  address.empty() ? "?" : address, d.status_text,
                  denied_.load());
  }
  // RFC 27 "ZAP reply": version, request id, status code, status text,
  // user id, metadata. Sent even for unparsable requests so REP can go on.
  const std::string request_id = frames.size() > 1 ? frames[1] : "";
  socket_.send(zmq::str_buffer("1.0"), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(request_id), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(d.status_code), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(d.status_text), zmq::send_flags::sndmore);
  socket_.send(zmq::buffer(d.user_id), zmq::send_flags::sndmore);
  socket_.send(zmq::message_t(), zmq::send_flags::none);
}

}  // namespace strata::coordinator
