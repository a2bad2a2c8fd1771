#include "comm/hybrid/hybrid_transport.h"

#include <future>

#include "absl/strings/str_cat.h"

namespace strata::comm {
namespace {

class HybridTransport final : public Transport {
 public:
  HybridTransport(int rank, std::vector<int> node_of,
                  std::vector<int> local_index, std::unique_ptr<Transport> shm,
                  std::unique_ptr<Transport> tcp)
      : rank_(rank),
        node_of_(std::move(node_of)),
        local_index_(std::move(local_index)),
        shm_(std::move(shm)),
        tcp_(std::move(tcp)) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(node_of_.size()); }
  const char* name() const override { return "shm+tcp"; }

  Status SendRecv(int send_peer, const void* send, size_t send_bytes,
                  int recv_peer, void* recv, size_t recv_bytes,
                  Deadline deadline) override {
    const bool send_local = send_peer >= 0 && Local(send_peer);
    const bool recv_local = recv_peer >= 0 && Local(recv_peer);
    if (send_peer < 0 || recv_peer < 0 || send_local == recv_local) {
      const bool local = send_peer >= 0 ? send_local : recv_local;
      Transport& t = local ? *shm_ : *tcp_;
      return t.SendRecv(Map(send_peer, local), send, send_bytes,
                        Map(recv_peer, local), recv, recv_bytes, deadline);
    }
    // Peers on different transports: progress both at once.
    Transport& st = send_local ? *shm_ : *tcp_;
    auto sent = std::async(std::launch::async, [&] {
      return st.Send(Map(send_peer, send_local), send, send_bytes, deadline);
    });
    Transport& rt = recv_local ? *shm_ : *tcp_;
    Status r = rt.Recv(Map(recv_peer, recv_local), recv, recv_bytes, deadline);
    Status s = sent.get();
    return s.ok() ? r : s;
  }

  void Abort() override {
    shm_->Abort();
    tcp_->Abort();
  }
  // Only the TCP side has network links; its ranks are this group's.
  std::vector<LinkCounter> LinkCounters() const override {
    return tcp_->LinkCounters();
  }

 private:
  bool Local(int peer) const { return node_of_[peer] == node_of_[rank_]; }
  int Map(int peer, bool local) const {
    if (peer < 0) return -1;
    return local ? local_index_[peer] : peer;
  }

  int rank_;
  std::vector<int> node_of_;
  std::vector<int> local_index_;  // rank -> index among its node's ranks
  std::unique_ptr<Transport> shm_, tcp_;
};

}  // namespace

StatusOr<std::unique_ptr<Transport>> ConnectHybridTransport(
    std::shared_ptr<Store> store, int rank, const std::vector<int>& node_of,
    const TcpOptions& tcp, const ShmOptions& shm) {
  const int size = static_cast<int>(node_of.size());
  if (rank < 0 || rank >= size) {
    return absl::InvalidArgumentError("bad hybrid transport rank");
  }
  std::vector<int> local_index(size);
  int local_size = 0;
  for (int r = 0; r < size; ++r) {
    int idx = 0;
    for (int q = 0; q < r; ++q) idx += node_of[q] == node_of[r];
    local_index[r] = idx;
    local_size += node_of[r] == node_of[rank];
  }
  ASSIGN_OR_RETURN(
      auto shm_t,
      ConnectShmTransport(
          NewPrefixStore(absl::StrCat("node", node_of[rank]), store),
          local_index[rank], local_size, shm));
  ASSIGN_OR_RETURN(auto tcp_t, ConnectTcpTransport(store, rank, size, tcp));
  return std::unique_ptr<Transport>(
      std::make_unique<HybridTransport>(rank, node_of, std::move(local_index),
                                        std::move(shm_t), std::move(tcp_t)));
}

}  // namespace strata::comm

#include <set>

#include "comm/process_group.h"

namespace strata::comm {

StatusOr<std::unique_ptr<ProcessGroup>> NewProcessGroup(
    std::shared_ptr<Store> store, int rank, const std::vector<int>& node_of,
    const GroupOptions& options, const TcpOptions& tcp, const ShmOptions& shm) {
  const int size = static_cast<int>(node_of.size());
  const std::set<int> nodes(node_of.begin(), node_of.end());
  StatusOr<std::unique_ptr<Transport>> t = absl::UnknownError("");
  if (nodes.size() == 1) {
    t = ConnectShmTransport(store, rank, size, shm);
  } else if (static_cast<int>(nodes.size()) == size) {
    t = ConnectTcpTransport(store, rank, size, tcp);
  } else {
    t = ConnectHybridTransport(store, rank, node_of, tcp, shm);
  }
  if (!t.ok()) return t.status();
  GroupOptions opts = options;
  opts.node_of = node_of;
  return std::make_unique<ProcessGroup>(std::move(*t), opts);
}

}  // namespace strata::comm
