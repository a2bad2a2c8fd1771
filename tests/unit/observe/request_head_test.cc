// The HTTP request-head parser, on tables of heads.
#include "observe/http/request_head.h"

#include <string>

#include "gtest/gtest.h"

namespace strata::observe::http {
namespace {

TEST(RequestHeadTest, ParsesACompleteHead) {
  const std::string bytes =
      "GET /api/trace.json?job=a%20b&x=1+2&flag HTTP/1.1\r\n"
      "Host: x\r\nAccept-Encoding:  gzip \r\n\r\nGET / HTTP/1.1\r\n";
  HeadResult r = ParseRequestHead(bytes, {});
  ASSERT_EQ(r.kind, HeadResult::kComplete) << r.error;
  EXPECT_EQ(r.consumed, bytes.find("GET /", 5));
  EXPECT_EQ(r.head.method, "GET");
  EXPECT_EQ(r.head.path, "/api/trace.json");
  EXPECT_EQ(r.head.params.at("job"), "a b");
  EXPECT_EQ(r.head.params.at("x"), "1 2");
  EXPECT_EQ(r.head.params.at("flag"), "");
  EXPECT_EQ(r.head.query_bytes, 3u + 3u + 2u + 1u + 3u + 2u + 4u + 0u + 2u);
  EXPECT_EQ(r.head.Field("accept-encoding"), "gzip");
  EXPECT_TRUE(r.head.KeepAlive());
}

TEST(RequestHeadTest, KeepAliveFollowsVersionAndConnection) {
  struct Case {
    const char* head;
    bool keep_alive;
  };
  for (const Case& c : {Case{"GET / HTTP/1.1\r\n\r\n", true},
                        Case{"GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
                             false},
                        Case{"GET / HTTP/1.0\r\n\r\n", false},
                        Case{"GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
                             true}}) {
    HeadResult r = ParseRequestHead(c.head, {});
    ASSERT_EQ(r.kind, HeadResult::kComplete) << c.head;
    EXPECT_EQ(r.head.KeepAlive(), c.keep_alive) << c.head;
  }
}

TEST(RequestHeadTest, RefusesWithTheRightStatus) {
  HeadLimits limits{.max_request_line_bytes = 64, .max_head_bytes = 256,
                    .max_fields = 4};
  struct Case {
    std::string bytes;
    HeadResult::Kind kind;
    int status;
  };
  const std::string many_fields = "GET / HTTP/1.1\r\na: 1\r\nb: 2\r\nc: 3\r\n"
                                  "d: 4\r\ne: 5\r\n\r\n";
  for (const Case& c : std::vector<Case>{
           {"GET / HTTP/1.1\r\nHost: x", HeadResult::kIncomplete, 0},
           {"GET /" + std::string(100, 'a'), HeadResult::kError, 414},
           {"GET / HTTP/1.1\r\nX: " + std::string(300, 'a'),
            HeadResult::kError, 431},
           {"GET / HTTP/1.1\r\nX: " + std::string(240, 'a') + "\r\n\r\n",
            HeadResult::kError, 431},
           {many_fields, HeadResult::kError, 431},
           {"POST / HTTP/1.1\r\nContent-Length: 4\r\n\r\n", HeadResult::kError,
            413},
           {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
            HeadResult::kError, 413},
           {"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            HeadResult::kComplete, 0},
           {"GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n", HeadResult::kError,
            400},
           {"GET / HTTP/2.0\r\n\r\n", HeadResult::kError, 505},
           {"GET nope HTTP/1.1\r\n\r\n", HeadResult::kError, 400},
           {"GET\r\n\r\n", HeadResult::kError, 400},
           {"GET / HTTP/1.1\r\nno colon\r\n\r\n", HeadResult::kError, 400},
           {"GET / HTTP/1.1\r\n folded: x\r\n\r\n", HeadResult::kError, 400},
       }) {
    HeadResult r = ParseRequestHead(c.bytes, limits);
    EXPECT_EQ(r.kind, c.kind) << c.bytes.substr(0, 40) << " " << r.error;
    EXPECT_EQ(r.status, c.status) << c.bytes.substr(0, 40);
    if (r.kind == HeadResult::kError) {
      EXPECT_FALSE(r.error.empty());
    }
  }
}

TEST(RequestHeadTest, PercentDecoding) {
  EXPECT_EQ(PercentDecode("%41+b%2f", true), "A b/");
  EXPECT_EQ(PercentDecode("a+b", false), "a+b");
  EXPECT_EQ(PercentDecode("%zz%4", true), "%zz%4");
}

}  // namespace
}  // namespace strata::observe::http
