// CURVE configuration of the control plane's sockets (ZMTP CURVE, RFC 26;
// authentication through ZAP, RFC 27). On-disk layout of a "curve dir"
// (docs/control-plane.md "Security"):
//
//   coordinator --curve-dir DIR:
//     DIR/server.key, DIR/server.key_secret   the coordinator's keypair
//     DIR/authorized_keys                      allowed client public keys:
//                                              a directory of NAME.key files
//                                              or a file of "KEY [NAME]" lines
//   worker / CLI / ranks --curve-dir DIR (or $STRATA_CURVE_DIR):
//     DIR/server.key                           the coordinator's public key
//     DIR/client.key, DIR/client.key_secret    this client's keypair (or the
//                                              only other NAME.key_secret)
//
// A directory made by MakeEphemeralCurveDir() has both layouts at once, so
// `strata run` passes the same DIR to its coordinator, workers and itself.
// Without a curve dir every socket stays plaintext (ZMTP NULL mechanism):
// for loopback and trusted networks only.
#pragma once

#include <optional>
#include <string>
#include <vector>
#include <zmq.hpp>

#include "common/status.h"
#include "control/curve_keys.h"

namespace strata::control {

inline constexpr char kCurveDirEnv[] = "STRATA_CURVE_DIR";
inline constexpr char kServerKeyName[] = "server";
inline constexpr char kClientKeyName[] = "client";
inline constexpr char kAuthorizedKeys[] = "authorized_keys";
// ZMQ_ZAP_DOMAIN of the coordinator's socket; the ZAP handler answers only it.
inline constexpr char kZapDomain[] = "strata";

struct CurveServerConfig {
  CurveKeyPair server;
  std::vector<AuthorizedKey> authorized;
  // Where `authorized` was read from; the ZAP handler re-reads it when an
  // unknown key connects (at most once a second), so keys added with
  // `strata keygen --authorize` work without a restart. Empty: never.
  std::string authorized_path;
};

struct CurveClientConfig {
  std::string server_public_key;  // Z85
  CurveKeyPair client;
};

// Reads DIR/server.key{,_secret} and DIR/authorized_keys. Errors name the
// file; an empty allow-list is FailedPrecondition (nobody could connect).
StatusOr<CurveServerConfig> LoadCurveServerConfig(const std::string& dir);

// Reads DIR/server.key and the client keypair (see layout above).
StatusOr<CurveClientConfig> LoadCurveClientConfig(const std::string& dir);

// The client configuration of a process: from `flag_dir` when non-empty, else
// from $STRATA_CURVE_DIR when set and non-empty, else nullopt (plaintext).
StatusOr<std::optional<CurveClientConfig>> CurveClientConfigFromFlagOrEnv(
    const std::string& flag_dir);

// The curve dir a client uses: `flag_dir`, else $STRATA_CURVE_DIR, else "";
// made absolute (it is passed on to ranks, which run elsewhere).
std::string ResolveCurveDir(const std::string& flag_dir);

// Sets ZMQ_CURVE_SERVER, ZMQ_CURVE_SECRETKEY, ZMQ_ZAP_DOMAIN (kZapDomain)
// and ZMQ_ZAP_ENFORCE_DOMAIN on `socket`, before it binds. Enforcing makes
// libzmq refuse connections when no ZAP handler answers, instead of
// accepting every CURVE client (libzmq 4.3 default).
Status ConfigureCurveServer(zmq::socket_t* socket,
                            const CurveServerConfig& config);

// Sets ZMQ_CURVE_SERVERKEY, ZMQ_CURVE_PUBLICKEY and ZMQ_CURVE_SECRETKEY on
// `socket`, before it connects.
Status ConfigureCurveClient(zmq::socket_t* socket,
                            const CurveClientConfig& config);

// Adds `public_key` under `name` to SERVER_DIR's allow-list with
// `attributes` ("role=worker node=dn1", "role=user", control::AuthorizedKey;
// empty: an admin key): writes authorized_keys/NAME.key when authorized_keys
// is a directory or missing (created, 0700), appends "KEY NAME ATTRS" when it
// is a file. AlreadyExists if NAME.key holds another line or the key is
// already listed in the file with another role; OK if listed with this one. A running coordinator picks it up at the key's
// first connection (ZapHandler).
Status AuthorizeClientKey(const std::string& server_dir,
                          const std::string& name,
                          const std::string& public_key,
                          const std::string& attributes = "");

// For `strata run`: creates PARENT/curve (mode 0700) holding a fresh server
// keypair, a fresh client keypair and authorized_keys/client.key, and returns
// its path. Usable as --curve-dir of the coordinator and of the clients.
StatusOr<std::string> MakeEphemeralCurveDir(const std::string& parent);

}  // namespace strata::control
