// Key files and curve dirs: round trips, and every bad file gives a clear
// error naming it (permissions, malformed keys, mismatched pairs, missing
// files, empty allow-lists).
#include "control/curve_keys.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "control/curve_config.h"

namespace strata::control {
namespace {

namespace fs = std::filesystem;

class CurveKeysTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = (fs::temp_directory_path() /
            ("strata-curve-keys-" + std::to_string(getpid())))
               .string();
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Write(const std::string& name, const std::string& text,
             fs::perms perms = fs::perms::owner_read | fs::perms::owner_write) {
    std::ofstream(dir_ + "/" + name) << text;
    fs::permissions(dir_ + "/" + name, perms);
  }
  static std::string Msg(const Status& s) { return std::string(s.message()); }

  std::string dir_;
};

TEST_F(CurveKeysTest, WritesAndReadsKeyPair) {
  auto keys = GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok()) << keys.status();
  ASSERT_TRUE(WriteKeyPair(dir_, "node-1", *keys).ok());
  EXPECT_EQ(fs::status(dir_ + "/node-1.key_secret").permissions() &
                (fs::perms::group_all | fs::perms::others_all),
            fs::perms::none);
  auto back = ReadKeyPair(dir_, "node-1");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->public_key, keys->public_key);
  EXPECT_EQ(back->secret_key, keys->secret_key);
  // Never overwritten.
  EXPECT_EQ(WriteKeyPair(dir_, "node-1", *keys).code(),
            absl::StatusCode::kAlreadyExists);
}

TEST_F(CurveKeysTest, RefusesGroupOrWorldReadableSecret) {
  auto keys = GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  Write("s.key_secret", keys->secret_key + "\n",
        fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
            fs::perms::others_read);
  auto r = ReadSecretKeyFile(dir_ + "/s.key_secret");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(Msg(r.status()).find("mode 0644"), std::string::npos);
  EXPECT_NE(Msg(r.status()).find("chmod 600"), std::string::npos);
  fs::permissions(dir_ + "/s.key_secret",
                  fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_TRUE(ReadSecretKeyFile(dir_ + "/s.key_secret").ok());
}

TEST_F(CurveKeysTest, RejectsMalformedKeyFiles) {
  Write("short.key", "abc\n");
  EXPECT_EQ(ReadPublicKeyFile(dir_ + "/short.key").status().code(),
            absl::StatusCode::kInvalidArgument);
  Write("bad.key", "# comment\n" + std::string(39, 'a') + "~\n");
  auto bad = ReadPublicKeyFile(dir_ + "/bad.key");
  EXPECT_NE(Msg(bad.status()).find("not Z85"), std::string::npos);
  EXPECT_NE(Msg(bad.status()).find("bad.key:2"), std::string::npos);
  Write("two.key", std::string(40, 'a') + "\n" + std::string(40, 'b') + "\n");
  EXPECT_NE(Msg(ReadPublicKeyFile(dir_ + "/two.key").status()).find("found 2"),
            std::string::npos);
  Write("empty.key", "# nothing\n");
  EXPECT_FALSE(ReadPublicKeyFile(dir_ + "/empty.key").ok());
  EXPECT_EQ(ReadPublicKeyFile(dir_ + "/missing.key").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadPublicKeyFile(dir_).status().code(),
            absl::StatusCode::kFailedPrecondition);  // a directory
}

TEST_F(CurveKeysTest, DetectsMismatchedPair) {
  auto a = GenerateCurveKeyPair();
  auto b = GenerateCurveKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(WriteKeyPair(dir_, "x", {a->public_key, b->secret_key}).ok());
  auto r = ReadKeyPair(dir_, "x");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(Msg(r.status()).find("mismatched"), std::string::npos);
}

TEST_F(CurveKeysTest, RejectsBadKeyNames) {
  auto keys = GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  for (const char* name : {"", "../x", ".hidden", "a b", "a/b"}) {
    EXPECT_EQ(WriteKeyPair(dir_, name, *keys).code(),
              absl::StatusCode::kInvalidArgument)
        << name;
  }
}

TEST_F(CurveKeysTest, ReadsAllowListFileAndDirectory) {
  auto a = GenerateCurveKeyPair();
  auto b = GenerateCurveKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  Write("allow", "# workers\n" + a->public_key + " node-a\n\n" + b->public_key +
                     "\n" + a->public_key + " dup\n");
  auto list = ReadAuthorizedKeys(dir_ + "/allow");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "node-a");
  EXPECT_EQ((*list)[1].public_key, b->public_key);

  fs::create_directories(dir_ + "/allow.d");
  ASSERT_TRUE(
      WritePublicKeyFile(dir_ + "/allow.d/w1.key", a->public_key, "w1").ok());
  std::ofstream(dir_ + "/allow.d/README") << "not a key\n";
  auto from_dir = ReadAuthorizedKeys(dir_ + "/allow.d");
  ASSERT_TRUE(from_dir.ok()) << from_dir.status();
  ASSERT_EQ(from_dir->size(), 1u);
  EXPECT_EQ((*from_dir)[0].name, "w1");
  // Same key again is a no-op, another key under the name is refused.
  EXPECT_TRUE(
      WritePublicKeyFile(dir_ + "/allow.d/w1.key", a->public_key, "w1").ok());
  EXPECT_EQ(
      WritePublicKeyFile(dir_ + "/allow.d/w1.key", b->public_key, "w1").code(),
      absl::StatusCode::kAlreadyExists);

  Write("bad-allow", a->public_key + "\nnot-a-key\n");
  auto bad = ReadAuthorizedKeys(dir_ + "/bad-allow");
  EXPECT_NE(Msg(bad.status()).find("bad-allow:2"), std::string::npos);
}

TEST_F(CurveKeysTest, EphemeralDirServesBothSides) {
  auto dir = MakeEphemeralCurveDir(dir_);
  ASSERT_TRUE(dir.ok()) << dir.status();
  EXPECT_EQ(fs::status(*dir).permissions(), fs::perms::owner_all);
  auto server = LoadCurveServerConfig(*dir);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = LoadCurveClientConfig(*dir);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(client->server_public_key, server->server.public_key);
  ASSERT_EQ(server->authorized.size(), 1u);
  EXPECT_EQ(server->authorized[0].public_key, client->client.public_key);
  EXPECT_EQ(server->authorized[0].name, "client");
  // A second call refuses to reuse the directory.
  EXPECT_FALSE(MakeEphemeralCurveDir(dir_).ok());
}

TEST_F(CurveKeysTest, ServerConfigErrorsNameTheProblem) {
  auto dir = MakeEphemeralCurveDir(dir_);
  ASSERT_TRUE(dir.ok());
  fs::remove(*dir + "/authorized_keys/client.key");
  auto empty = LoadCurveServerConfig(*dir);
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(Msg(empty.status()).find("no client keys"), std::string::npos);
  fs::permissions(*dir + "/server.key_secret", fs::perms::others_read,
                  fs::perm_options::add);
  EXPECT_NE(Msg(LoadCurveServerConfig(*dir).status()).find("chmod 600"),
            std::string::npos);
  EXPECT_EQ(LoadCurveServerConfig(dir_ + "/nope").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CurveKeysTest, AuthorizesIntoDirectoryOrFile) {
  auto a = GenerateCurveKeyPair();
  auto b = GenerateCurveKeyPair();
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE(AuthorizeClientKey(dir_, "w1", a->public_key).ok());
  EXPECT_TRUE(AuthorizeClientKey(dir_, "w1", a->public_key).ok());
  EXPECT_EQ(AuthorizeClientKey(dir_, "w1", b->public_key).code(),
            absl::StatusCode::kAlreadyExists);
  auto list = ReadAuthorizedKeys(dir_ + "/authorized_keys");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 1u);

  const std::string other = dir_ + "/other";
  fs::create_directories(other);
  std::ofstream(other + "/authorized_keys") << "# list\n";
  ASSERT_TRUE(AuthorizeClientKey(other, "w1", a->public_key).ok());
  ASSERT_TRUE(AuthorizeClientKey(other, "w2", b->public_key).ok());
  ASSERT_TRUE(AuthorizeClientKey(other, "again", a->public_key).ok());
  auto from_file = ReadAuthorizedKeys(other + "/authorized_keys");
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  ASSERT_EQ(from_file->size(), 2u);
  EXPECT_EQ((*from_file)[1].name, "w2");
  EXPECT_FALSE(AuthorizeClientKey(dir_, "../x", a->public_key).ok());
}

TEST_F(CurveKeysTest, ClientConfigFindsItsKeypair) {
  auto server = GenerateCurveKeyPair();
  auto worker = GenerateCurveKeyPair();
  ASSERT_TRUE(server.ok() && worker.ok());
  ASSERT_TRUE(
      WritePublicKeyFile(dir_ + "/server.key", server->public_key, "s").ok());
  EXPECT_EQ(LoadCurveClientConfig(dir_).status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteKeyPair(dir_, "node-7", *worker).ok());
  auto c = LoadCurveClientConfig(dir_);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->client.public_key, worker->public_key);
  ASSERT_TRUE(WriteKeyPair(dir_, "node-8", *server).ok());
  EXPECT_NE(Msg(LoadCurveClientConfig(dir_).status()).find("node-7, node-8"),
            std::string::npos);

  setenv(kCurveDirEnv, "", 1);
  auto none = CurveClientConfigFromFlagOrEnv("");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  setenv(kCurveDirEnv, (dir_ + "/missing").c_str(), 1);
  auto env = CurveClientConfigFromFlagOrEnv("");
  EXPECT_NE(Msg(env.status()).find("$STRATA_CURVE_DIR"), std::string::npos);
  unsetenv(kCurveDirEnv);
}

TEST_F(CurveKeysTest, TrustFilesOthersCanWriteAreRefused) {
  auto keys = GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  ASSERT_TRUE(WriteKeyPair(dir_, "c", *keys).ok());
  EXPECT_TRUE(ReadPublicKeyFile(dir_ + "/c.key").ok());
  fs::permissions(dir_ + "/c.key", fs::perms::group_write,
                  fs::perm_options::add);
  EXPECT_NE(Msg(ReadPublicKeyFile(dir_ + "/c.key").status())
                .find("writable by group or others (mode 0664)"),
            std::string::npos);
  fs::permissions(dir_ + "/c.key", fs::perms::group_write,
                  fs::perm_options::remove);
  // The directory holding a key counts too.
  fs::permissions(dir_, fs::perms::others_write, fs::perm_options::add);
  auto r = ReadKeyPair(dir_, "c");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(Msg(r.status()).find(dir_ + ": writable by group or others"),
            std::string::npos)
      << r.status();
  fs::permissions(dir_, fs::perms::others_write, fs::perm_options::remove);
  // An allow-list directory anyone can write into.
  ASSERT_TRUE(AuthorizeClientKey(dir_, "c", keys->public_key).ok());
  ASSERT_TRUE(ReadAuthorizedKeys(dir_ + "/authorized_keys").ok());
  fs::permissions(dir_ + "/authorized_keys", fs::perms::all);
  EXPECT_NE(Msg(ReadAuthorizedKeys(dir_ + "/authorized_keys").status())
                .find("(mode 0777)"),
            std::string::npos);
}

}  // namespace
}  // namespace strata::control
