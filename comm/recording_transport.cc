#include "comm/recording_transport.h"

namespace strata::comm {

void RecordingTransport::Record(int send_peer, size_t send_bytes, int recv_peer,
                                size_t recv_bytes, int64_t start_ns,
                                const Status& st) {
  if (!tracking_ || (current_ == nullptr && first_ns_ != 0)) return;
  const int64_t now = WallNowNs();
  if (st.ok() && first_ns_ == 0) first_ns_ = now;
  if (current_ == nullptr) return;
  const int64_t ns = now - start_ns;
  if (st.ok()) current_->Started();
  // A call with two peers is charged to both: each of them held it up.
  if (send_peer >= 0 && send_bytes > 0) {
    current_->Transfer(World(send_peer), send_bytes, ns);
  }
  if (recv_peer >= 0 && recv_bytes > 0 && recv_peer != send_peer) {
    current_->Transfer(World(recv_peer), recv_bytes, ns);
  } else if (recv_peer >= 0 && recv_bytes > 0) {
    current_->Transfer(World(recv_peer), recv_bytes, 0);
  }
}

Status RecordingTransport::SendRecv(int send_peer, const void* send,
                                    size_t send_bytes, int recv_peer,
                                    void* recv, size_t recv_bytes,
                                    Deadline deadline) {
  const int64_t t0 = current_ ? WallNowNs() : 0;  // transfer time: recorder
  Status st = base_->SendRecv(send_peer, send, send_bytes, recv_peer, recv,
                              recv_bytes, deadline);
  Record(send_peer, send_bytes, recv_peer, recv_bytes, t0, st);
  return st;
}

Status RecordingTransport::SendRecvReduce(int send_peer, const void* send,
                                          size_t send_bytes, int recv_peer,
                                          void* acc, size_t count,
                                          DataType type, ReduceOp op,
                                          Deadline deadline) {
  const int64_t t0 = current_ ? WallNowNs() : 0;
  Status st = base_->SendRecvReduce(send_peer, send, send_bytes, recv_peer, acc,
                                    count, type, op, deadline);
  Record(send_peer, send_bytes, recv_peer, count * ElementSize(type), t0, st);
  return st;
}

Status RecordingTransport::SharedAllReduce(void* buf, size_t count,
                                           DataType type, ReduceOp op,
                                           Deadline deadline) {
  const int64_t t0 = current_ ? WallNowNs() : 0;
  Status st = base_->SharedAllReduce(buf, count, type, op, deadline);
  const size_t bytes = count * ElementSize(type);
  for (int p = 0; p < size(); ++p) {
    if (p != rank()) Record(p, bytes, -1, 0, t0, st);
  }
  return st;
}

}  // namespace strata::comm
