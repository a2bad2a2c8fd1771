// CURVE key files (ZMTP CURVE, RFC 26; keys in Z85 text, RFC 32) as written
// by `strata keygen`. A keypair NAME lives in two files of one directory:
//
//   NAME.key         the public key: '#' comment lines, then one line of 40
//                    Z85 characters. Share freely.
//   NAME.key_secret  the secret key, same format. Must not be readable or
//                    writable by group or others (mode 0600): loading refuses
//                    such a file, like ssh does.
//
// An allow-list of client public keys is either a directory of NAME.key files
// or one file with a key per line ("KEY [NAME]", '#' comments). NAME becomes
// the ZAP user id, so logs name the client. All functions are thread-safe and
// return errors that name the file and say how to fix it.
//
// Every key file and allow-list read here is a trust file: it, and the
// directory holding it, must be owned by root or by this process's effective
// user and must not be writable by group or others (CheckTrustedPath), or
// whoever can write it could plant a key. Reads refuse anything else.
#pragma once

#include <sys/stat.h>

#include <string>
#include <vector>

#include "common/status.h"

namespace strata::control {

inline constexpr size_t kZ85KeyChars = 40;  // 32 bytes, Z85-encoded
inline constexpr char kPublicKeySuffix[] = ".key";
inline constexpr char kSecretKeySuffix[] = ".key_secret";

struct CurveKeyPair {
  std::string public_key;  // Z85, 40 characters
  std::string secret_key;  // Z85, 40 characters
};

// One allow-listed client: its public key (Z85), a name for logs and what
// it may do (docs/security.md "Roles"). An allow-list line (or the key line
// of an authorized_keys/NAME.key file) is
//   KEY [NAME] [role=admin|user|worker] [node=NODE] [name=USER]
// role=worker needs node= (the one node the key may register as); role=user
// acts as `name=` (default NAME). A line without role= is an admin key
// (what every key was before roles existed).
struct AuthorizedKey {
  std::string public_key;
  std::string name;
  std::string role = "admin";  // "admin", "user" or "worker"
  std::string node;            // role=worker: its node name
};

// The roles an allow-list may grant (ranks get per-attempt keys instead).
inline constexpr char kRoleAdmin[] = "admin";
inline constexpr char kRoleUser[] = "user";
inline constexpr char kRoleWorker[] = "worker";

// InvalidArgument unless `name` is a usable node name: 1-63 characters of
// [A-Za-z0-9._-], starting with a letter or digit (a hostname label plus
// '.' and '_', so it is safe in file names, worker ids and KV keys).
Status ValidateNodeName(const std::string& name);

// A fresh keypair from libzmq (zmq_curve_keypair). FailedPrecondition if
// libzmq was built without CURVE support (zmq_has("curve") == 0).
StatusOr<CurveKeyPair> GenerateCurveKeyPair();

// OK if libzmq supports CURVE, else FailedPrecondition saying so.
Status CheckCurveSupported();

// InvalidArgument unless `key` is 40 valid Z85 characters. `what` names the
// key's origin in the message (a file path).
Status ValidateZ85Key(const std::string& key, const std::string& what);

// The 32 raw bytes of a validated Z85 key.
std::string DecodeZ85Key(const std::string& key);

// How a trust file or directory must be protected: kPublic = not writable by
// group or others; kSecret = no access at all for group or others.
enum class Trust { kPublic, kSecret };

// OK if `st` (the stat of `path`) is owned by root or geteuid() and its mode
// follows `trust`; otherwise FailedPrecondition naming the path, its mode
// and owner, and the fix.
Status CheckTrustedStat(const std::string& path, const struct stat& st,
                        Trust trust);
// stat(2)s `path` (following symlinks) and checks it as above; NotFound if
// it does not exist.
Status CheckTrustedPath(const std::string& path, Trust trust = Trust::kPublic);

// Reads a key file (format above). NotFound if missing, InvalidArgument if
// it holds no key, several keys or a malformed key, FailedPrecondition if it
// or its directory fails CheckTrustedPath (kPublic) or it is not a regular
// file.
StatusOr<std::string> ReadPublicKeyFile(const std::string& path);
// Same with the file checked as kSecret (no group/other access at all).
StatusOr<std::string> ReadSecretKeyFile(const std::string& path);
// Reads DIR/NAME.key and DIR/NAME.key_secret and checks that the public key
// belongs to the secret key (zmq_curve_public).
StatusOr<CurveKeyPair> ReadKeyPair(const std::string& dir,
                                   const std::string& name);

// Writes DIR/NAME.key (0644) and DIR/NAME.key_secret (0600), creating DIR
// (0700) if needed. AlreadyExists if either file exists: keys are never
// overwritten. InvalidArgument if NAME is not [A-Za-z0-9._-]+.
Status WriteKeyPair(const std::string& dir, const std::string& name,
                    const CurveKeyPair& keys);

// Writes one public key file PATH (0644): the key, then `attributes`
// ("role=worker node=dn1", see AuthorizedKey) on its line. AlreadyExists if
// PATH holds a different line; OK without writing if it holds the same.
Status WritePublicKeyFile(const std::string& path, const std::string& key,
                          const std::string& comment,
                          const std::string& attributes = "");

// Loads an allow-list from a directory of *.key files or a file of keys.
// Duplicate keys are merged. InvalidArgument names the bad file and line;
// FailedPrecondition if the list, a key file in it or the directory holding
// it fails CheckTrustedPath.
StatusOr<std::vector<AuthorizedKey>> ReadAuthorizedKeys(
    const std::string& path);

// InvalidArgument unless `name` is a usable key name ([A-Za-z0-9._-]+, not
// starting with '.').
Status ValidateKeyName(const std::string& name);

}  // namespace strata::control
