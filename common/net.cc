#include "common/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace strata::net {
namespace {

std::string Dotted(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf));
  return buf;
}

StatusOr<sockaddr_in> Ipv4Sockaddr(const std::string& addr, int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, addr.c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", addr, "' is not an IPv4 address"));
  }
  return a;
}

}  // namespace

StatusOr<HostPort> ParseHostPort(std::string_view s) {
  const size_t colon = s.rfind(':');
  HostPort hp;
  if (colon == std::string_view::npos || colon == 0 ||
      !absl::SimpleAtoi(std::string(s.substr(colon + 1)), &hp.port) ||
      hp.port < 1 || hp.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(s), "' is not HOST:PORT (port 1-65535)"));
  }
  hp.host = std::string(s.substr(0, colon));
  return hp;
}

StatusOr<std::string> ResolveIpv4(const std::string& host) {
  in_addr a;
  if (inet_pton(AF_INET, host.c_str(), &a) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("'", host, "' does not resolve to an IPv4 address: ",
                     rc != 0 ? gai_strerror(rc) : "no address"));
  }
  std::string out = Dotted(*reinterpret_cast<sockaddr_in*>(res->ai_addr));
  freeaddrinfo(res);
  return out;
}

bool IsLoopback(std::string_view ipv4) { return ipv4.starts_with("127."); }

StatusOr<int> ListenTcp(const std::string& bind_addr, int port, int backlog) {
  ASSIGN_OR_RETURN(sockaddr_in a, Ipv4Sockaddr(bind_addr, port));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      listen(fd, backlog) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoToStatus(err, absl::StrCat("listen on ", bind_addr, ":", port));
  }
  return fd;
}

StatusOr<int> BoundPort(int fd) {
  sockaddr_in a{};
  socklen_t len = sizeof(a);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return ErrnoToStatus(errno, "getsockname");
  }
  return static_cast<int>(ntohs(a.sin_port));
}

StatusOr<int> PickFreePort(const std::string& bind_addr) {
  ASSIGN_OR_RETURN(sockaddr_in a, Ipv4Sockaddr(bind_addr, 0));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoToStatus(err, absl::StrCat("bind ", bind_addr, ":0"));
  }
  StatusOr<int> port = BoundPort(fd);
  close(fd);
  return port;
}

StatusOr<std::string> ReachableHostAddress() {
  // This host's up, non-loopback IPv4 interface addresses, in order.
  ifaddrs* ifs = nullptr;
  if (getifaddrs(&ifs) != 0) return ErrnoToStatus(errno, "getifaddrs");
  std::vector<std::string> local;
  for (ifaddrs* p = ifs; p != nullptr; p = p->ifa_next) {
    if (p->ifa_addr == nullptr || p->ifa_addr->sa_family != AF_INET ||
        !(p->ifa_flags & IFF_UP) || (p->ifa_flags & IFF_LOOPBACK))
      continue;
    std::string a = Dotted(*reinterpret_cast<const sockaddr_in*>(p->ifa_addr));
    if (!IsLoopback(a)) local.push_back(std::move(a));
  }
  freeifaddrs(ifs);
  if (local.empty()) {
    return absl::NotFoundError(
        "this host has no up, non-loopback IPv4 interface address");
  }
  // Prefer the address the hostname resolves to, if it is one of ours (a
  // shared /etc/hosts may name another host's or namespace's address).
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (getaddrinfo(host, nullptr, &hints, &res) == 0) {
      std::string found;
      for (addrinfo* p = res; p != nullptr && found.empty(); p = p->ai_next) {
        std::string a = Dotted(*reinterpret_cast<sockaddr_in*>(p->ai_addr));
        if (std::find(local.begin(), local.end(), a) != local.end()) found = a;
      }
      freeaddrinfo(res);
      if (!found.empty()) return found;
    }
  }
  return local[0];
}

}  // namespace strata::net
