// The read-only HTTP listener, with real requests over loopback.
#include "observe/http_server.h"

#include <httplib.h>

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace strata::observe {
namespace {

std::map<std::string, HttpHandler> Routes() {
  return {{"/metrics", [](const HttpRequest& r) {
             HttpResponse out;
             out.body = "strata_up 1\n";
             if (r.params.count("x"))
               out.body += "x=" + r.params.at("x") + "\n";
             return out;
           }}};
}

TEST(HttpServerTest, ServesRoutesAndRefusesEverythingElse) {
  auto server = HttpServer::Start({}, Routes());
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client c("127.0.0.1", (*server)->port());
  auto r = c.Get("/metrics?x=a%20b");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "strata_up 1\nx=a b\n");

  r = c.Get("/nope");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(r->body.find("/metrics"), std::string::npos);

  r = c.Post("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
  r = c.Post("/metrics", "data", "text/plain");  // bodies are refused
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  r = c.Delete("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);

  // A huge query string: refused, and the server keeps serving.
  r = c.Get("/metrics?x=" + std::string(6000, 'a'));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 414);
  r = c.Get("/metrics?x=" + std::string(20000, 'a'));
  ASSERT_TRUE(r);
  EXPECT_GE(r->status, 400);
  r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// Prometheus asks for gzip and gets it; a client that also accepts brotli
// gets gzip too, and one that accepts only brotli gets the plain text.
TEST(HttpServerTest, CompressesWithGzipOnly) {
  auto server = HttpServer::Start(
      {}, {{"/metrics", [](const HttpRequest&) {
              HttpResponse out;
              out.body = std::string(100000, 'a');
              return out;
            }}});
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client c("127.0.0.1", (*server)->port());
  c.set_decompress(false);
  for (const auto& [accept, want] :
       std::vector<std::pair<std::string, std::string>>{
           {"gzip", "gzip"},
           {"br, gzip, deflate", "gzip"},
           {"br", ""},
           {"", ""}}) {
    httplib::Headers h;
    if (!accept.empty()) h.emplace("Accept-Encoding", accept);
    auto r = c.Get("/metrics", h);
    ASSERT_TRUE(r) << accept;
    EXPECT_EQ(r->status, 200) << accept;
    EXPECT_EQ(r->get_header_value("Content-Encoding"), want) << accept;
    if (want.empty()) {
      EXPECT_EQ(r->body.size(), 100000u) << accept;
    } else {
      EXPECT_LT(r->body.size(), 1000u) << accept;
    }
  }
}

TEST(HttpServerTest, ATokenIsRequiredOffLoopbackAndChecked) {
  HttpServerOptions o;
  o.listen = "0.0.0.0:0";
  auto refused = HttpServer::Start(o, Routes());
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status()));
  EXPECT_NE(std::string(refused.status().message()).find("token"),
            std::string::npos);

  o.listen = "127.0.0.1:0";
  o.token = "s3cret";
  auto server = HttpServer::Start(o, Routes());
  ASSERT_TRUE(server.ok()) << server.status();
  httplib::Client c("127.0.0.1", (*server)->port());
  auto r = c.Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = c.Get("/metrics?token=wrong");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = c.Get("/metrics?token=s3cret");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = c.Get("/metrics", {{"Authorization", "Bearer s3cret"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST(HttpServerTest, BadListenAddressesAreErrors) {
  for (const char* bad :
       {"", "127.0.0.1", ":80", "127.0.0.1:x", "127.0.0.1:70000"}) {
    HttpServerOptions o;
    o.listen = bad;
    EXPECT_TRUE(
        absl::IsInvalidArgument(HttpServer::Start(o, Routes()).status()))
        << bad;
  }
  auto first = HttpServer::Start({}, Routes());
  ASSERT_TRUE(first.ok());
  HttpServerOptions o;
  o.listen = "127.0.0.1:" + std::to_string((*first)->port());
  auto second = HttpServer::Start(o, Routes());
  EXPECT_TRUE(absl::IsUnavailable(second.status())) << second.status();
}

}  // namespace
}  // namespace strata::observe
