// `strata keygen --out DIR [--name NAME] [--authorize SERVER_DIR
// --role admin|user|worker [--node NODE]]`: writes a CURVE keypair
// (zmq_curve_keypair, Z85) as DIR/NAME.key and DIR/NAME.key_secret (0600).
// With --authorize, also adds the public key to SERVER_DIR's allow-list with
// its role (a worker key bound to --node, a user key acting as NAME) and
// copies the coordinator's server.key into DIR, so DIR is a complete client
// curve dir. Never overwrites a key. Layout: control/curve_config.h; roles:
// docs/security.md.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "control/curve_config.h"

namespace strata::cli {
namespace {

namespace sc = control;

struct KeygenArgs {
  std::string out;
  std::string name = sc::kClientKeyName;
  std::string authorize;
  std::string role;  // empty with --authorize: refused (say which role)
  std::string node;
};

// The allow-list attributes of a key (control::AuthorizedKey).
StatusOr<std::string> RoleAttributes(const KeygenArgs& a) {
  if (a.role.empty()) {
    return absl::InvalidArgumentError(
        "--authorize needs --role admin, user or worker (docs/security.md): "
        "an admin can do anything, a user only acts on its own jobs, a "
        "worker only runs its --node");
  }
  if (a.role == sc::kRoleWorker) {
    if (a.node.empty()) {
      return absl::InvalidArgumentError(
          "--role worker needs --node NODE: the one node this key may "
          "register as");
    }
    RETURN_IF_ERROR(sc::ValidateNodeName(a.node));
    return absl::StrCat("role=worker node=", a.node);
  }
  if (!a.node.empty()) {
    return absl::InvalidArgumentError("--node is only for --role worker");
  }
  if (a.role == sc::kRoleUser) return std::string("role=user");
  if (a.role == sc::kRoleAdmin) return std::string("role=admin");
  return absl::InvalidArgumentError(absl::StrCat(
      "--role '", a.role, "' is not admin, user or worker"));
}

[[noreturn]] void KeygenFail(int code, const Status& s) {
  std::fprintf(stderr, "strata keygen: %s\n", std::string(s.message()).c_str());
  throw CLI::RuntimeError(code);
}

int ExitCodeFor(const Status& s) {
  return absl::IsInternal(s) || absl::IsUnavailable(s) ? kExitFailed
                                                       : kExitBadInput;
}

void Keygen(const KeygenArgs& a) {
  if (Status s = sc::ValidateKeyName(a.name); !s.ok()) {
    KeygenFail(kExitBadInput, s);
  }
  std::string server_key;
  std::string attributes;
  if (!a.authorize.empty()) {
    auto attrs = RoleAttributes(a);
    if (!attrs.ok()) KeygenFail(kExitBadInput, attrs.status());
    attributes = *attrs;
    if (a.name == sc::kServerKeyName) {
      KeygenFail(kExitBadInput,
                 absl::InvalidArgumentError(
                     "--authorize makes a client key; it cannot be named "
                     "'server'"));
    }
    // Checked before anything is written, so a typo leaves no half state.
    auto key = sc::ReadPublicKeyFile(
        (std::filesystem::path(a.authorize) / sc::kServerKeyName).string() +
        sc::kPublicKeySuffix);
    if (!key.ok()) {
      KeygenFail(kExitBadInput,
                 absl::InvalidArgumentError(absl::StrCat(
                     "--authorize ", a.authorize, ": ", key.status().message(),
                     " (create the coordinator's keys first: strata keygen "
                     "--out ",
                     a.authorize, " --name server)")));
    }
    server_key = *key;
  }
  auto keys = sc::GenerateCurveKeyPair();
  if (!keys.ok()) KeygenFail(kExitFailed, keys.status());
  if (Status s = sc::WriteKeyPair(a.out, a.name, *keys); !s.ok()) {
    KeygenFail(ExitCodeFor(s), s);
  }
  const std::string base = (std::filesystem::path(a.out) / a.name).string();
  std::printf("wrote %s%s (public) and %s%s (secret, mode 0600)\n",
              base.c_str(), sc::kPublicKeySuffix, base.c_str(),
              sc::kSecretKeySuffix);
  if (a.authorize.empty()) return;
  if (Status s = sc::AuthorizeClientKey(a.authorize, a.name, keys->public_key,
                                        attributes);
      !s.ok()) {
    KeygenFail(ExitCodeFor(s), s);
  }
  const std::string copy =
      (std::filesystem::path(a.out) / sc::kServerKeyName).string() +
      sc::kPublicKeySuffix;
  if (Status s = sc::WritePublicKeyFile(copy, server_key,
                                        "strata coordinator public key");
      !s.ok()) {
    KeygenFail(ExitCodeFor(s), s);
  }
  std::printf(
      "authorized '%s' (%s) in %s/%s; copied the coordinator's key to %s\n",
      a.name.c_str(), attributes.c_str(), a.authorize.c_str(),
      sc::kAuthorizedKeys, copy.c_str());
}

}  // namespace

void AddKeygenCommand(CLI::App* app) {
  auto* cmd = app->add_subcommand(
      "keygen",
      "create a CURVE keypair for the control plane (coordinator: --name "
      "server; workers and clients: --authorize COORDINATOR_CURVE_DIR)");
  auto a = std::make_shared<KeygenArgs>();
  cmd->add_option("--out", a->out, "directory for NAME.key and NAME.key_secret")
      ->required();
  cmd->add_option("--name", a->name,
                  "key name: 'server' for the coordinator, anything else for "
                  "a client")
      ->capture_default_str();
  cmd->add_option("--authorize", a->authorize,
                  "the coordinator's curve dir: add the new public key to its "
                  "authorized_keys and copy its server.key into --out");
  cmd->add_option("--role", a->role,
                  "with --authorize: admin (everything), user (its own jobs, "
                  "acting as --name) or worker (one --node)");
  cmd->add_option("--node", a->node,
                  "with --role worker: the node this key may register as");
  cmd->callback([a] { Keygen(*a); });
}

}  // namespace strata::cli
