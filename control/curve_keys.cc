#include "control/curve_keys.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace strata::control {
namespace {

namespace fs = std::filesystem;

constexpr size_t kMaxKeyFileBytes = 64 << 10;
constexpr size_t kMaxAllowListBytes = 16 << 20;

// The 85 characters of the Z85 alphabet (RFC 32).
constexpr std::string_view kZ85Alphabet =
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    ".-:+=^!/*?&<>()[]{}@%$#";

struct FileText {
  std::string text;
};

std::string ParentDir(const std::string& path) {
  fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// Reads at most `limit` bytes of the trust file `path` after checking its
// directory and itself (CheckTrustedStat on the opened descriptor, so what
// is checked is what is read).
StatusOr<FileText> ReadSmallFile(const std::string& path, size_t limit,
                                 Trust trust) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoToStatus(errno, "open " + path);
  FileText out;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int err = errno;
    close(fd);
    return ErrnoToStatus(err, "stat " + path);
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a regular file"));
  }
  Status trusted = CheckTrustedStat(path, st, trust);
  if (trusted.ok()) trusted = CheckTrustedPath(ParentDir(path));
  if (!trusted.ok()) {
    close(fd);
    return trusted;
  }
  if (static_cast<size_t>(st.st_size) > limit) {
    close(fd);
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is ", st.st_size, " bytes; a key file is at most ", limit));
  }
  char buf[4096];
  while (out.text.size() <= limit) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      return ErrnoToStatus(err, "read " + path);
    }
    if (n == 0) break;
    out.text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

// The non-comment, non-blank lines of a key file, trimmed.
std::vector<std::pair<int, std::string>> KeyLines(const std::string& text) {
  std::vector<std::pair<int, std::string>> lines;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    lines.emplace_back(number, std::string(line));
  }
  return lines;
}

StatusOr<std::string> ParseSingleKey(const std::string& path,
                                     const std::string& text) {
  auto lines = KeyLines(text);
  if (lines.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": expected one Z85 key line, found ", lines.size(),
                     " (write key files with `strata keygen`)"));
  }
  RETURN_IF_ERROR(
      ValidateZ85Key(lines[0].second, absl::StrCat(path, ":", lines[0].first)));
  return lines[0].second;
}

// KEY [NAME] [role=R] [node=N] [name=U] (curve_keys.h AuthorizedKey).
StatusOr<AuthorizedKey> ParseKeyLine(const std::string& line,
                                     const std::string& where,
                                     const std::string& default_name) {
  std::vector<std::string> fields =
      absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  RETURN_IF_ERROR(ValidateZ85Key(fields[0], where));
  AuthorizedKey key;
  key.public_key = fields[0];
  key.name = default_name;
  for (size_t i = 1; i < fields.size(); ++i) {
    const std::string& f = fields[i];
    const size_t eq = f.find('=');
    if (eq == std::string::npos) {
      if (i != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": '", f, "' is neither the key's name (second field) nor "
            "role=, node= or name="));
      }
      key.name = f;
      continue;
    }
    const std::string k = f.substr(0, eq), v = f.substr(eq + 1);
    if (k == "role") {
      if (v != kRoleAdmin && v != kRoleUser && v != kRoleWorker) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, ": role '", v, "' is not admin, user or worker (ranks get "
            "per-attempt keys from the coordinator, never an allow-list "
            "entry)"));
      }
      key.role = v;
    } else if (k == "node") {
      RETURN_IF_ERROR(ValidateNodeName(v));
      key.node = v;
    } else if (k == "name") {
      RETURN_IF_ERROR(ValidateKeyName(v));
      key.name = v;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": unknown attribute '", k, "' (role=, node=, name=)"));
    }
  }
  if (key.role == kRoleWorker && key.node.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        where, ": a role=worker key needs node=NODE, the one node it may "
        "register as"));
  }
  if (key.role != kRoleWorker && !key.node.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": node= is only for role=worker keys"));
  }
  return key;
}

Status WriteFileExclusive(const std::string& path, const std::string& text,
                          mode_t mode) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0) {
    if (errno == EEXIST) {
      return absl::AlreadyExistsError(
          absl::StrCat(path,
                       " already exists; keys are never overwritten "
                       "(remove it first or choose another --name)"));
    }
    return ErrnoToStatus(errno, "create " + path);
  }
  // The umask may have narrowed `mode`; it can never widen it. fchmod makes
  // the public file readable as documented even under umask 077.
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      close(fd);
      unlink(path.c_str());
      return ErrnoToStatus(err, "write " + path);
    }
    done += static_cast<size_t>(n);
  }
  int rc = fchmod(fd, mode) == 0 && fsync(fd) == 0 ? 0 : errno;
  close(fd);
  if (rc != 0) {
    unlink(path.c_str());
    return ErrnoToStatus(rc, "write " + path);
  }
  return absl::OkStatus();
}

std::string ModeText(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof(text), "%04o", mode & 07777);
  return text;
}

std::string UserName(uid_t uid) {
  struct passwd pw;
  struct passwd* found = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found) {
    return absl::StrCat(uid, " (", found->pw_name, ")");
  }
  return absl::StrCat(uid);
}

}  // namespace

Status CheckTrustedStat(const std::string& path, const struct stat& st,
                        Trust trust) {
  const char* what = S_ISDIR(st.st_mode) ? "directory" : "file";
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing CURVE trust ", what, " ", path, ": owned by uid ",
        UserName(st.st_uid), ", not by root or this process's user (uid ",
        UserName(geteuid()), "; mode ", ModeText(st.st_mode),
        "). Whoever owns it can plant keys. Run: chown ", UserName(geteuid()),
        " ", path));
  }
  if (trust == Trust::kSecret && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "secret key file ", path, " is accessible by group or others (mode ",
        ModeText(st.st_mode), "); refusing to use it. Run: chmod 600 ", path));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "refusing CURVE trust ", what, " ", path,
        ": writable by group or others (mode ", ModeText(st.st_mode),
        "), so anyone could plant a key. Run: chmod go-w ", path));
  }
  return absl::OkStatus();
}

Status CheckTrustedPath(const std::string& path, Trust trust) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return ErrnoToStatus(errno, "stat " + path);
  return CheckTrustedStat(path, st, trust);
}

Status CheckCurveSupported() {
  if (zmq_has("curve") == 0) {
    return absl::FailedPreconditionError(
        "this libzmq was built without CURVE support (zmq_has(\"curve\") is "
        "0); install a libzmq built with libsodium");
  }
  return absl::OkStatus();
}

StatusOr<CurveKeyPair> GenerateCurveKeyPair() {
  RETURN_IF_ERROR(CheckCurveSupported());
  char pub[kZ85KeyChars + 1] = {0};
  char sec[kZ85KeyChars + 1] = {0};
  if (zmq_curve_keypair(pub, sec) != 0) {
    return absl::InternalError(
        absl::StrCat("zmq_curve_keypair: ", zmq_strerror(zmq_errno())));
  }
  return CurveKeyPair{pub, sec};
}

Status ValidateZ85Key(const std::string& key, const std::string& what) {
  if (key.size() != kZ85KeyChars) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, ": a CURVE key is ", kZ85KeyChars,
                     " Z85 characters, got ", key.size()));
  }
  for (char c : key) {
    if (kZ85Alphabet.find(c) == std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          what, ": character '", std::string(1, c), "' is not Z85"));
    }
  }
  return absl::OkStatus();
}

std::string DecodeZ85Key(const std::string& key) {
  std::string raw(32, '\0');
  zmq_z85_decode(reinterpret_cast<uint8_t*>(raw.data()), key.c_str());
  return raw;
}

Status ValidateNodeName(const std::string& name) {
  bool ok = !name.empty() && name.size() <= 63 &&
            absl::ascii_isalnum(static_cast<unsigned char>(name.front()));
  for (char c : name) {
    ok = ok && (absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "node name '", name,
        "' must be 1-63 characters of [A-Za-z0-9._-] starting with a letter "
        "or digit"));
  }
  return absl::OkStatus();
}

Status ValidateKeyName(const std::string& name) {
  bool ok = !name.empty() && name.front() != '.' && name.size() <= 128;
  for (char c : name) {
    ok = ok && (absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-');
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key name '", name,
        "' must be 1-128 characters of [A-Za-z0-9._-], not starting with '.'"));
  }
  return absl::OkStatus();
}

StatusOr<std::string> ReadPublicKeyFile(const std::string& path) {
  ASSIGN_OR_RETURN(FileText f,
                   ReadSmallFile(path, kMaxKeyFileBytes, Trust::kPublic));
  return ParseSingleKey(path, f.text);
}

StatusOr<std::string> ReadSecretKeyFile(const std::string& path) {
  ASSIGN_OR_RETURN(FileText f,
                   ReadSmallFile(path, kMaxKeyFileBytes, Trust::kSecret));
  return ParseSingleKey(path, f.text);
}

StatusOr<CurveKeyPair> ReadKeyPair(const std::string& dir,
                                   const std::string& name) {
  const std::string base = (fs::path(dir) / name).string();
  CurveKeyPair keys;
  ASSIGN_OR_RETURN(keys.public_key, ReadPublicKeyFile(base + kPublicKeySuffix));
  ASSIGN_OR_RETURN(keys.secret_key, ReadSecretKeyFile(base + kSecretKeySuffix));
  char derived[kZ85KeyChars + 1] = {0};
  if (zmq_curve_public(derived, keys.secret_key.c_str()) != 0 ||
      keys.public_key != derived) {
    return absl::InvalidArgumentError(
        absl::StrCat(base, kPublicKeySuffix, " is not the public key of ", base,
                     kSecretKeySuffix, " (mismatched keypair)"));
  }
  return keys;
}

Status WritePublicKeyFile(const std::string& path, const std::string& key,
                          const std::string& comment,
                          const std::string& attributes) {
  RETURN_IF_ERROR(ValidateZ85Key(key, path));
  const std::string line =
      attributes.empty() ? key : absl::StrCat(key, " ", attributes);
  RETURN_IF_ERROR(ParseKeyLine(line, path, "").status());
  if (fs::exists(path)) {
    auto existing = ReadSmallFile(path, kMaxKeyFileBytes, Trust::kPublic);
    if (existing.ok()) {
      auto lines = KeyLines(existing->text);
      if (lines.size() == 1 && lines[0].second == line) {
        return absl::OkStatus();
      }
    }
    return absl::AlreadyExistsError(absl::StrCat(
        path,
        " already exists with another key or role; remove it first or "
        "choose another --name"));
  }
  return WriteFileExclusive(
      path, absl::StrCat("# ", comment, "\n", line, "\n"), 0644);
}

Status WriteKeyPair(const std::string& dir, const std::string& name,
                    const CurveKeyPair& keys) {
  RETURN_IF_ERROR(ValidateKeyName(name));
  RETURN_IF_ERROR(ValidateZ85Key(keys.public_key, "public key"));
  RETURN_IF_ERROR(ValidateZ85Key(keys.secret_key, "secret key"));
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fs::create_directories(dir, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", dir, ": ", ec.message()));
    }
    fs::permissions(dir, fs::perms::owner_all, ec);
  }
  const std::string base = (fs::path(dir) / name).string();
  const std::string pub = base + kPublicKeySuffix;
  const std::string sec = base + kSecretKeySuffix;
  if (fs::exists(pub, ec) || fs::exists(sec, ec)) {
    return absl::AlreadyExistsError(absl::StrCat(
        base,
        ".{key,key_secret} already exist; keys are never overwritten "
        "(remove them first or choose another --name)"));
  }
  // Secret first: a crash in between leaves no public key without a secret.
  RETURN_IF_ERROR(WriteFileExclusive(
      sec,
      absl::StrCat("# strata CURVE secret key '", name,
                   "' (ZeroMQ Z85). Keep private: mode 0600.\n",
                   keys.secret_key, "\n"),
      0600));
  return WriteFileExclusive(
      pub,
      absl::StrCat("# strata CURVE public key '", name,
                   "' (ZeroMQ Z85). Share freely.\n", keys.public_key, "\n"),
      0644);
}

StatusOr<std::vector<AuthorizedKey>> ReadAuthorizedKeys(
    const std::string& path) {
  std::vector<AuthorizedKey> keys;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    RETURN_IF_ERROR(CheckTrustedPath(path));
    RETURN_IF_ERROR(CheckTrustedPath(ParentDir(path)));
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(path, ec)) {
      if (e.path().extension() == kPublicKeySuffix) files.push_back(e.path());
    }
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot list ", path, ": ", ec.message()));
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) {
      ASSIGN_OR_RETURN(FileText t, ReadSmallFile(f.string(), kMaxKeyFileBytes,
                                                 Trust::kPublic));
      auto lines = KeyLines(t.text);
      if (lines.size() != 1) {
        return absl::InvalidArgumentError(absl::StrCat(
            f.string(), ": expected one key line, found ", lines.size(),
            " (write key files with `strata keygen`)"));
      }
      ASSIGN_OR_RETURN(
          AuthorizedKey key,
          ParseKeyLine(lines[0].second,
                       absl::StrCat(f.string(), ":", lines[0].first),
                       f.stem().string()));
      keys.push_back(std::move(key));
    }
  } else {
    ASSIGN_OR_RETURN(FileText f,
                     ReadSmallFile(path, kMaxAllowListBytes, Trust::kPublic));
    for (const auto& [number, line] : KeyLines(f.text)) {
      const std::string where = absl::StrCat(path, ":", number);
      ASSIGN_OR_RETURN(AuthorizedKey key, ParseKeyLine(line, where, where));
      keys.push_back(std::move(key));
    }
  }
  std::set<std::string> seen;
  std::erase_if(keys, [&](const AuthorizedKey& k) {
    return !seen.insert(k.public_key).second;
  });
  return keys;
}

}  // namespace strata::control
