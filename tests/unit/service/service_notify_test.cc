// ServiceNotifier against a real notify socket: what systemd would receive.
#include "common/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace strata {
namespace {

// A datagram socket standing in for systemd's $NOTIFY_SOCKET.
class NotifySocket {
 public:
  NotifySocket() {
    path_ = "/tmp/strata-notify-test-" + std::to_string(getpid());
    unlink(path_.c_str());
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    path_.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  }
  ~NotifySocket() {
    close(fd_);
    unlink(path_.c_str());
  }
  const std::string& path() const { return path_; }
  std::vector<std::string> Drain() {
    std::vector<std::string> out;
    char buf[512];
    ssize_t n;
    while ((n = recv(fd_, buf, sizeof(buf), 0)) > 0) out.emplace_back(buf, n);
    return out;
  }

 private:
  std::string path_;
  int fd_ = -1;
};

TEST(ServiceNotifierTest, NoSocketIsANoOp) {
  unsetenv("NOTIFY_SOCKET");
  ServiceNotifier n;
  EXPECT_FALSE(n.enabled());
  n.Ready("x");
  n.Tick(0);
  n.Stopping();
}

TEST(ServiceNotifierTest, ReadyOnceWatchdogAtHalfTheInterval) {
  NotifySocket sock;
  setenv("NOTIFY_SOCKET", sock.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "2000000", 1);  // WatchdogSec=2
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  ServiceNotifier n;
  ASSERT_TRUE(n.enabled());
  EXPECT_EQ(n.watchdog_interval_ms(), 2000);
  n.Ready("serving");
  n.Ready("serving");  // only the first is sent
  n.Tick(10'000);      // first tick pings
  n.Tick(10'999);      // < 1000 ms later: no ping
  n.Tick(11'000);      // half the interval: ping
  n.Stopping();
  EXPECT_EQ(sock.Drain(),
            (std::vector<std::string>{"READY=1\nSTATUS=serving", "WATCHDOG=1",
                                      "WATCHDOG=1", "STOPPING=1"}));
}

TEST(ServiceNotifierTest, WatchdogOfAnotherProcessIsIgnored) {
  NotifySocket sock;
  setenv("NOTIFY_SOCKET", sock.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "2000000", 1);
  setenv("WATCHDOG_PID", std::to_string(getpid() + 1).c_str(), 1);  // a rank
  ServiceNotifier n;
  EXPECT_EQ(n.watchdog_interval_ms(), 0);
  n.Tick(0);
  EXPECT_TRUE(sock.Drain().empty());
}

}  // namespace
}  // namespace strata
