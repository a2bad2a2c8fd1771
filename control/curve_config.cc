#include "control/curve_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::control {
namespace {

namespace fs = std::filesystem;

// ZMQ_ZAP_ENFORCE_DOMAIN is a DRAFT option in libzmq 4.3 (93 in zmq.h);
// libzmq builds without the draft API reject it with EINVAL, and then the
// RouterServer's guarantee that its ZAP handler is bound before the socket
// binds is what keeps unauthenticated CURVE clients out.
constexpr int kZapEnforceDomain = 93;

Status SetOpt(zmq::socket_t* socket, int option, const void* value, size_t size,
              const char* name) {
  if (zmq_setsockopt(socket->handle(), option, value, size) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("setsockopt ", name, ": ", zmq_strerror(zmq_errno())));
  }
  return absl::OkStatus();
}

// The client keypair name in `dir`: "client" if present, else the only
// NAME.key_secret other than server.key_secret.
StatusOr<std::string> ClientKeyName(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(
          fs::path(dir) / (std::string(kClientKeyName) + kSecretKeySuffix),
          ec)) {
    return std::string(kClientKeyName);
  }
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != kSecretKeySuffix) continue;
    std::string name = e.path().stem().string();
    if (name != kServerKeyName) names.push_back(name);
  }
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat("cannot read curve dir ", dir, ": ", ec.message()));
  }
  if (names.size() == 1) return names[0];
  if (names.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no client keypair in curve dir ", dir,
        " (expected client.key and client.key_secret; create them with "
        "`strata keygen --out ",
        dir, " --authorize COORDINATOR_CURVE_DIR`)"));
  }
  std::sort(names.begin(), names.end());
  return absl::InvalidArgumentError(
      absl::StrCat("curve dir ", dir, " holds several client keypairs (",
                   absl::StrJoin(names, ", "),
                   "); keep one per directory or name it 'client'"));
}

}  // namespace

StatusOr<CurveServerConfig> LoadCurveServerConfig(const std::string& dir) {
  RETURN_IF_ERROR(CheckCurveSupported());
  CurveServerConfig config;
  ASSIGN_OR_RETURN(config.server, ReadKeyPair(dir, kServerKeyName));
  config.authorized_path = (fs::path(dir) / kAuthorizedKeys).string();
  ASSIGN_OR_RETURN(config.authorized,
                   ReadAuthorizedKeys(config.authorized_path));
  if (config.authorized.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no client keys in ", config.authorized_path,
                     ": no worker or client could connect. Authorize one with "
                     "`strata keygen --out CLIENT_DIR --authorize ",
                     dir, "`"));
  }
  return config;
}

StatusOr<CurveClientConfig> LoadCurveClientConfig(const std::string& dir) {
  RETURN_IF_ERROR(CheckCurveSupported());
  CurveClientConfig config;
  ASSIGN_OR_RETURN(config.server_public_key,
                   ReadPublicKeyFile((fs::path(dir) / kServerKeyName).string() +
                                     kPublicKeySuffix));
  ASSIGN_OR_RETURN(std::string name, ClientKeyName(dir));
  ASSIGN_OR_RETURN(config.client, ReadKeyPair(dir, name));
  return config;
}

std::string ResolveCurveDir(const std::string& flag_dir) {
  std::string dir = flag_dir;
  if (dir.empty()) {
    const char* env = std::getenv(kCurveDirEnv);
    dir = env != nullptr ? env : "";
  }
  if (dir.empty()) return dir;
  std::error_code ec;
  fs::path abs = fs::absolute(dir, ec);
  return ec ? dir : abs.string();
}

StatusOr<std::optional<CurveClientConfig>> CurveClientConfigFromFlagOrEnv(
    const std::string& flag_dir) {
  const std::string dir = ResolveCurveDir(flag_dir);
  if (dir.empty()) return std::optional<CurveClientConfig>();
  auto config = LoadCurveClientConfig(dir);
  if (!config.ok()) {
    return Status(
        config.status().code(),
        absl::StrCat(flag_dir.empty() ? "$STRATA_CURVE_DIR: " : "--curve-dir: ",
                     config.status().message()));
  }
  return std::optional<CurveClientConfig>(*std::move(config));
}

Status ConfigureCurveServer(zmq::socket_t* socket,
                            const CurveServerConfig& config) {
  RETURN_IF_ERROR(CheckCurveSupported());
  RETURN_IF_ERROR(ValidateZ85Key(config.server.secret_key, "server secret"));
  int one = 1;
  RETURN_IF_ERROR(
      SetOpt(socket, ZMQ_CURVE_SERVER, &one, sizeof(one), "CURVE_SERVER"));
  RETURN_IF_ERROR(SetOpt(socket, ZMQ_CURVE_SECRETKEY,
                         config.server.secret_key.data(), kZ85KeyChars,
                         "CURVE_SECRETKEY"));
  RETURN_IF_ERROR(SetOpt(socket, ZMQ_ZAP_DOMAIN, kZapDomain,
                         sizeof(kZapDomain) - 1, "ZAP_DOMAIN"));
  // Best effort, see kZapEnforceDomain.
  zmq_setsockopt(socket->handle(), kZapEnforceDomain, &one, sizeof(one));
  return absl::OkStatus();
}

Status ConfigureCurveClient(zmq::socket_t* socket,
                            const CurveClientConfig& config) {
  RETURN_IF_ERROR(CheckCurveSupported());
  RETURN_IF_ERROR(ValidateZ85Key(config.server_public_key, "server key"));
  RETURN_IF_ERROR(ValidateZ85Key(config.client.public_key, "client key"));
  RETURN_IF_ERROR(ValidateZ85Key(config.client.secret_key, "client secret"));
  RETURN_IF_ERROR(SetOpt(socket, ZMQ_CURVE_SERVERKEY,
                         config.server_public_key.data(), kZ85KeyChars,
                         "CURVE_SERVERKEY"));
  RETURN_IF_ERROR(SetOpt(socket, ZMQ_CURVE_PUBLICKEY,
                         config.client.public_key.data(), kZ85KeyChars,
                         "CURVE_PUBLICKEY"));
  return SetOpt(socket, ZMQ_CURVE_SECRETKEY, config.client.secret_key.data(),
                kZ85KeyChars, "CURVE_SECRETKEY");
}

Status AuthorizeClientKey(const std::string& server_dir,
                          const std::string& name,
                          const std::string& public_key,
                          const std::string& attributes) {
  RETURN_IF_ERROR(ValidateKeyName(name));
  RETURN_IF_ERROR(ValidateZ85Key(public_key, "public key"));
  const std::string allow = (fs::path(server_dir) / kAuthorizedKeys).string();
  std::error_code ec;
  if (fs::is_regular_file(allow, ec)) {
    ASSIGN_OR_RETURN(auto keys, ReadAuthorizedKeys(allow));
    for (const auto& k : keys) {
      if (k.public_key == public_key) {
        const std::string listed =
            k.role == kRoleAdmin && attributes.empty()
                ? ""
                : absl::StrCat("role=", k.role,
                               k.node.empty() ? "" : " node=" + k.node);
        if (listed == attributes) return absl::OkStatus();
        return absl::AlreadyExistsError(absl::StrCat(
            "key '", name, "' is already listed in ", allow, " as '", k.name,
            "' (role=", k.role, "); edit that line to change its role"));
      }
    }
    std::ofstream out(allow, std::ios::app);
    out << public_key << " " << name
        << (attributes.empty() ? "" : " " + attributes) << "\n";
    out.flush();
    if (!out) return absl::UnavailableError("cannot append to " + allow);
    return absl::OkStatus();
  }
  if (!fs::is_directory(allow, ec) && mkdir(allow.c_str(), 0700) != 0) {
    return ErrnoToStatus(errno, "mkdir " + allow);
  }
  return WritePublicKeyFile(
      (fs::path(allow) / name).string() + kPublicKeySuffix, public_key,
      absl::StrCat("strata CURVE public key '", name, "' (authorized client)"),
      attributes);
}

StatusOr<std::string> MakeEphemeralCurveDir(const std::string& parent) {
  const std::string dir = (fs::path(parent) / "curve").string();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (mkdir(dir.c_str(), 0700) != 0) {
    return ErrnoToStatus(errno, "mkdir " + dir);
  }
  ASSIGN_OR_RETURN(CurveKeyPair server, GenerateCurveKeyPair());
  ASSIGN_OR_RETURN(CurveKeyPair client, GenerateCurveKeyPair());
  RETURN_IF_ERROR(WriteKeyPair(dir, kServerKeyName, server));
  RETURN_IF_ERROR(WriteKeyPair(dir, kClientKeyName, client));
  const std::string allow = (fs::path(dir) / kAuthorizedKeys).string();
  if (mkdir(allow.c_str(), 0700) != 0) {
    return ErrnoToStatus(errno, "mkdir " + allow);
  }
  RETURN_IF_ERROR(WritePublicKeyFile(
      (fs::path(allow) / kClientKeyName).string() + kPublicKeySuffix,
      client.public_key, "strata CURVE public key 'client' (strata run)"));
  return dir;
}

}  // namespace strata::control
