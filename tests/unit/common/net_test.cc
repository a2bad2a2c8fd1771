#include "common/net.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace strata::net {
namespace {

TEST(ParseHostPortTest, SplitsAtTheLastColon) {
  auto hp = ParseHostPort("node-1.example:29400");
  ASSERT_TRUE(hp.ok()) << hp.status();
  EXPECT_EQ(hp->host, "node-1.example");
  EXPECT_EQ(hp->port, 29400);
  EXPECT_EQ(ParseHostPort("10.0.0.1:1")->host, "10.0.0.1");
}

TEST(ParseHostPortTest, MalformedValuesAreQuoted) {
  for (const char* bad :
       {"host", "host:", ":80", "host:0", "host:65536", "host:http", ""}) {
    auto hp = ParseHostPort(bad);
    ASSERT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(hp.status().message().find(std::string("'") + bad + "'"),
              std::string::npos)
        << hp.status();
  }
}

TEST(ResolveIpv4Test, DottedQuadsAndNames) {
  EXPECT_EQ(*ResolveIpv4("10.1.2.3"), "10.1.2.3");
  auto local = ResolveIpv4("localhost");
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_TRUE(IsLoopback(*local)) << *local;
}

TEST(ResolveIpv4Test, UnknownNameIsNotFoundNamingIt) {
  // .invalid never resolves (RFC 6761).
  auto a = ResolveIpv4("no-such-host.invalid");
  ASSERT_EQ(a.status().code(), absl::StatusCode::kNotFound) << a.status();
  EXPECT_NE(a.status().message().find(
                "'no-such-host.invalid' does not resolve to an IPv4 address"),
            std::string::npos)
      << a.status();
}

TEST(IsLoopbackTest, OnlyOneTwoSeven) {
  EXPECT_TRUE(IsLoopback("127.0.0.1"));
  EXPECT_TRUE(IsLoopback("127.8.9.10"));
  EXPECT_FALSE(IsLoopback("10.0.0.1"));
  EXPECT_FALSE(IsLoopback("0.0.0.0"));
}

TEST(ListenTcpTest, AcceptsAConnectionOnTheBoundPort) {
  auto fd = ListenTcp("127.0.0.1", 0, 4);
  ASSERT_TRUE(fd.ok()) << fd.status();
  auto port = BoundPort(*fd);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_GT(*port, 0);
  const int c = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(*port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  EXPECT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const int accepted = accept(*fd, nullptr, nullptr);
  EXPECT_GE(accepted, 0);
  close(accepted);
  close(c);
  // The port is taken while the socket listens.
  auto again = ListenTcp("127.0.0.1", *port, 4);
  EXPECT_FALSE(again.ok());
  close(*fd);
  EXPECT_EQ(ListenTcp("localhost", 0, 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PickFreePortTest, ThePortCanBeBound) {
  auto port = PickFreePort("127.0.0.1");
  ASSERT_TRUE(port.ok()) << port.status();
  auto fd = ListenTcp("127.0.0.1", *port, 1);
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
  EXPECT_FALSE(PickFreePort("not-an-address").ok());
}

TEST(ReachableHostAddressTest, IsANonLoopbackAddressOfThisHost) {
  auto a = ReachableHostAddress();
  if (!a.ok()) {
    EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
    GTEST_SKIP() << "no non-loopback interface: " << a.status();
  }
  EXPECT_FALSE(IsLoopback(*a)) << *a;
  // It is one of ours: a socket can bind it.
  auto fd = ListenTcp(*a, 0, 1);
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
}

}  // namespace
}  // namespace strata::net
