#include "launch/net.h"

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

namespace strata::launch {
namespace {

bool IsLoopback(const sockaddr_in& a) {
  return (ntohl(a.sin_addr.s_addr) >> 24) == 127;
}

std::string Dotted(const sockaddr_in& a) {
  char buf[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &a.sin_addr, buf, sizeof(buf));
  return buf;
}

}  // namespace

StatusOr<int> PickFreePort(const std::string& bind_addr) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, bind_addr.c_str(), &a.sin_addr) != 1) {
    return absl::InvalidArgumentError("not an IPv4 address: " + bind_addr);
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoToStatus(errno, "socket");
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoToStatus(err, "bind " + bind_addr + ":0");
  }
  close(fd);
  return static_cast<int>(ntohs(a.sin_port));
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
    const auto* in = reinterpret_cast<const sockaddr_in*>(p->ifa_addr);
    if (!IsLoopback(*in)) local.push_back(Dotted(*in));
  }
  freeifaddrs(ifs);
  if (local.empty()) {
    return absl::NotFoundError(
        "this host has no non-loopback IPv4 address; pass --master-addr");
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
        const std::string a =
            Dotted(*reinterpret_cast<const sockaddr_in*>(p->ai_addr));
        if (std::find(local.begin(), local.end(), a) != local.end()) found = a;
      }
      freeaddrinfo(res);
      if (!found.empty()) return found;
    }
  }
  return local[0];
}

}  // namespace strata::launch
