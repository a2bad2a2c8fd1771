// ZAP decisions (RFC 27) as a pure function, the handler answering a raw
// ZAP request over inproc like libzmq would, and the log rate limiter.
#include "coordinator/security/zap_handler.h"

#include <gtest/gtest.h>

namespace strata::coordinator {
namespace {

class ZapDecisionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto keys = control::GenerateCurveKeyPair();
    ASSERT_TRUE(keys.ok());
    key_ = *keys;
    allowed_ = MakeAllowList({{key_.public_key, "node-a"}});
  }
  ZapRequest Curve(const std::string& raw_key) {
    return {"1.0",   "7",      control::kZapDomain, "10.0.0.1", "",
            "CURVE", {raw_key}};
  }
  control::CurveKeyPair key_;
  AllowList allowed_;
};

TEST_F(ZapDecisionTest, AcceptsAllowListedCurveKey) {
  ZapDecision d =
      DecideZap(Curve(control::DecodeZ85Key(key_.public_key)), allowed_);
  EXPECT_TRUE(d.allowed);
  EXPECT_EQ(d.status_code, "200");
  EXPECT_EQ(d.user_id, "admin:node-a");  // no role= in the list: admin
  EXPECT_EQ(d.key_z85, key_.public_key);
}

TEST_F(ZapDecisionTest, RejectsEverythingElseWith400) {
  auto other = control::GenerateCurveKeyPair();
  ASSERT_TRUE(other.ok());
  ZapDecision unknown =
      DecideZap(Curve(control::DecodeZ85Key(other->public_key)), allowed_);
  EXPECT_FALSE(unknown.allowed);
  EXPECT_EQ(unknown.status_code, "400");
  EXPECT_NE(unknown.status_text.find(other->public_key), std::string::npos);
  EXPECT_NE(unknown.status_text.find("not authorized"), std::string::npos);

  ZapRequest null_mech = Curve("");
  null_mech.mechanism = "NULL";
  null_mech.credentials.clear();
  EXPECT_NE(DecideZap(null_mech, allowed_).status_text.find("requires CURVE"),
            std::string::npos);

  ZapRequest plain = null_mech;
  plain.mechanism = "PLAIN";
  plain.credentials = {"user", "password"};
  EXPECT_EQ(DecideZap(plain, allowed_).status_code, "400");

  ZapRequest version = Curve(control::DecodeZ85Key(key_.public_key));
  version.version = "2.0";
  EXPECT_EQ(DecideZap(version, allowed_).status_code, "400");

  ZapRequest domain = Curve(control::DecodeZ85Key(key_.public_key));
  domain.domain = "other";
  EXPECT_NE(DecideZap(domain, allowed_).status_text.find("domain"),
            std::string::npos);

  ZapRequest short_key = Curve("abc");
  EXPECT_NE(DecideZap(short_key, allowed_).status_text.find("malformed"),
            std::string::npos);
  ZapRequest two = Curve(control::DecodeZ85Key(key_.public_key));
  two.credentials.push_back("x");
  EXPECT_EQ(DecideZap(two, allowed_).status_code, "400");
}

TEST(ZapParseTest, NeedsSixFrames) {
  EXPECT_FALSE(ParseZapRequest({"1.0", "1", "d", "a", "i"}).ok());
  auto r = ParseZapRequest({"1.0", "1", "d", "a", "i", "CURVE", "k"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->credentials, std::vector<std::string>{"k"});
}

// A REQ socket speaks to the handler exactly as libzmq's sessions do.
TEST(ZapHandlerTest, AnswersRequestsOverInproc) {
  auto keys = control::GenerateCurveKeyPair();
  ASSERT_TRUE(keys.ok());
  control::CurveServerConfig config;
  config.authorized = {{keys->public_key, "node-a"}};
  zmq::context_t ctx;
  ZapHandler handler(&ctx, config, GetLogger("CTRL"));
  ASSERT_TRUE(handler.Start().ok());
  zmq::socket_t req(ctx, zmq::socket_type::req);
  req.set(zmq::sockopt::linger, 0);
  req.connect(kZapEndpoint);
  auto ask = [&](std::vector<std::string> frames) {
    for (size_t i = 0; i < frames.size(); ++i) {
      req.send(zmq::buffer(frames[i]), i + 1 < frames.size()
                                           ? zmq::send_flags::sndmore
                                           : zmq::send_flags::none);
    }
    std::vector<std::string> reply;
    zmq::message_t part;
    do {
      EXPECT_TRUE(req.recv(part));
      reply.push_back(part.to_string());
    } while (part.more());
    return reply;
  };
  auto ok = ask({"1.0", "r1", control::kZapDomain, "127.0.0.1", "", "CURVE",
                 control::DecodeZ85Key(keys->public_key)});
  ASSERT_EQ(ok.size(), 6u);
  EXPECT_EQ(ok[0], "1.0");
  EXPECT_EQ(ok[1], "r1");
  EXPECT_EQ(ok[2], "200");
  EXPECT_EQ(ok[4], "admin:node-a");
  auto no = ask({"1.0", "r2", control::kZapDomain, "127.0.0.1", "", "NULL"});
  EXPECT_EQ(no[1], "r2");
  EXPECT_EQ(no[2], "400");
  auto junk = ask({"garbage"});  // still answered: REP must reply
  EXPECT_EQ(junk[2], "400");
  EXPECT_EQ(handler.allowed(), 1u);
  EXPECT_EQ(handler.denied(), 2u);
  // One handler per context.
  ZapHandler second(&ctx, config, GetLogger("CTRL"));
  EXPECT_EQ(second.Start().code(), absl::StatusCode::kAlreadyExists);
  handler.Stop();
}

}  // namespace
}  // namespace strata::coordinator
