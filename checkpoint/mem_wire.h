// The memory tier's wire protocol (docs/checkpoint.md "Memory tier"): how a
// rank's mem:// storage talks to a worker's replica server
// (worker/replica_server.h) over TCP. A data plane like the collectives'
// TCP transport (docs/security.md): no authentication, peers on the job's
// network are trusted; every field from the network is still checked
// (lengths bounded, names one path component), so a bad request is refused
// with a message, never a crash.
//
// One request per connection: the client sends a Request (fixed header,
// then the job id and entry name), then for kPut exactly `length` bytes;
// the server answers one Reply (status code, message, payload length) and
// the payload. kPut is answered twice: once after the header (admission:
// OK, or ResourceExhausted over the worker's memory limit, before a byte of
// data is sent) and once after the data (written or not).
//
// All integers little-endian. Blocking sockets with a per-call timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"

namespace strata::checkpoint::mem {

// Environment of a rank using the memory tier, set by its worker and the
// coordinator's launch (one place: docs/checkpoint.md "Memory tier").
// The job's directory in the worker's memory dir (DIR/<job id>).
inline constexpr char kMemDirEnv[] = "STRATA_MEM_DIR";
// host:port of every node's replica server, in the attempt's node order.
inline constexpr char kMemPeersEnv[] = "STRATA_MEM_PEERS";
// This rank's node index into STRATA_MEM_PEERS.
inline constexpr char kMemNodeEnv[] = "STRATA_MEM_NODE";
// Replica traffic rate, MiB/s per rank (token bucket); 0: unshaped.
inline constexpr char kMemRateEnv[] = "STRATA_MEM_RATE_MIBS";
// The default rate: a quarter of a 10 Gbit/s link shared by a node's ranks
// (issue 35: replica traffic must not slow the collectives by > 1%; the
// bucket keeps it to a steady trickle instead of bursts at line rate).
inline constexpr double kDefaultRateMiBs = 256;

enum class Op : uint8_t {
  kPut = 1,    // write entry (job, step, name): `length` bytes follow
  kGet = 2,    // read [offset, offset + length) of the entry
  kStat = 3,   // the entry's size (payload: u64)
  kList = 4,   // committed steps of the job (payload: i64 each, ascending)
  kDrop = 5,   // remove the job's step
  kAdmit = 6,  // may this worker hold `length` more bytes? (local writes)
  // Pin committed step `step` for a reader: answered once the pin holds
  // (NotFound when the step is not committed there); the pin lasts until
  // the client closes the connection. kDrop of a pinned step is refused
  // with FailedPrecondition (Storage::PinStep's contract, across nodes).
  kPin = 7,
};

struct Request {
  Op op = Op::kStat;
  std::string job;
  int64_t step = -1;  // -1: the job's root (LATEST)
  std::string name;   // empty for kList and kDrop
  uint64_t offset = 0;
  uint64_t length = 0;
};

// Bounds on what the network may ask for.
inline constexpr size_t kMaxIdBytes = 255;
inline constexpr uint64_t kMaxEntryBytes = uint64_t{1} << 40;

// Socket helpers. Each fails with Unavailable naming `what` (the peer).
Status WriteAll(int fd, const void* data, size_t n, const std::string& what);
Status ReadAll(int fd, void* data, size_t n, const std::string& what);
// A connected socket to "host:port" (the host resolved as an IPv4 name),
// with send/receive timeouts of `timeout_ms`. Unavailable when refused or
// unreachable, naming the endpoint.
StatusOr<int> Dial(const std::string& endpoint, int timeout_ms);
// Sets send/receive timeouts on `fd`.
void SetTimeouts(int fd, int timeout_ms);

Status SendRequest(int fd, const Request& r, const std::string& what);
// InvalidArgument for an unknown op, an oversized or invalid job id or
// name, a step < -1 or a length beyond kMaxEntryBytes.
StatusOr<Request> RecvRequest(int fd, const std::string& what);
// The reply header: `st`'s code and message, then `length` payload bytes
// the caller writes next.
Status SendReply(int fd, const Status& st, uint64_t length,
                 const std::string& what);
struct Reply {
  Status status;
  uint64_t length = 0;  // payload bytes that follow
};
StatusOr<Reply> RecvReply(int fd, const std::string& what);

class TokenBucket;

// Sends bytes [offset, offset + n) of the open file `file_fd` to socket
// `sock`, in pieces of at most 1 MiB each paced by `bucket` (may be null),
// with sendfile(2): on Linux the file's page-cache (tmpfs) pages go to the
// socket without a CPU copy. Falls back to pread + send where sendfile is
// refused. Unavailable naming `what` when the socket fails; the read error
// naming the file otherwise.
Status SendFileRange(int sock, int file_fd, uint64_t offset, uint64_t n,
                     TokenBucket* bucket, const std::string& what);
// Receives exactly `n` bytes from socket `sock` into the open file
// `file_fd` at its current offset, with splice(2) through a pipe (the
// socket's pages move into the pipe without a copy; the one CPU copy is
// into the file's pages); falls back to recv + write where splice is
// refused. Unavailable naming `what` when the socket fails or closes early.
Status RecvToFile(int sock, int file_fd, uint64_t n, const std::string& what);

// A token bucket (rate bytes/s, burst bytes) pacing replica traffic.
// Thread-safe; Acquire sleeps. rate <= 0: never waits.
class TokenBucket {
 public:
  TokenBucket(double bytes_per_s, double burst_bytes);
  // Blocks until `n` bytes may be sent (taken in pieces of at most the
  // burst, so n may exceed it).
  void Acquire(uint64_t n);
  double rate() const { return rate_; }

 private:
  const double rate_, burst_;
  Mutex mu_;
  double tokens_ ABSL_GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_ ABSL_GUARDED_BY(mu_);
};

// One replica server, as a client (a connection per call). Thread-safe.
class ReplicaClient {
 public:
  ReplicaClient(std::string endpoint, int timeout_ms)
      : endpoint_(std::move(endpoint)), timeout_ms_(timeout_ms) {}
  const std::string& endpoint() const { return endpoint_; }

  // Sends `size` bytes produced by `read(offset, buf, n)` as the entry,
  // paced by `bucket` (may be null). ResourceExhausted when the server's
  // memory limit refuses it (nothing sent).
  Status Put(const std::string& job, int64_t step, const std::string& name,
             uint64_t size,
             const std::function<Status(uint64_t, char*, size_t)>& read,
             TokenBucket* bucket);
  // Sends bytes [0, size) of the open file `fd` as the entry
  // (SendFileRange: no CPU copy on this side), paced by `bucket`.
  Status PutFile(const std::string& job, int64_t step, const std::string& name,
                 int fd, uint64_t size, TokenBucket* bucket);
  Status PutBytes(const std::string& job, int64_t step,
                  const std::string& name, const std::string& bytes,
                  TokenBucket* bucket);
  // Exactly n bytes at offset; NotFound when the server lacks the entry.
  Status Get(const std::string& job, int64_t step, const std::string& name,
             uint64_t offset, void* buf, size_t n);
  StatusOr<std::string> GetAll(const std::string& job, int64_t step,
                               const std::string& name);
  StatusOr<uint64_t> Stat(const std::string& job, int64_t step,
                          const std::string& name);
  StatusOr<std::vector<int64_t>> List(const std::string& job);
  Status Drop(const std::string& job, int64_t step);
  Status Admit(const std::string& job, int64_t step, const std::string& name,
               uint64_t bytes);
  // Pins `step` on this server (Op::kPin): the returned socket holds the
  // pin until closed by the caller.
  StatusOr<int> Pin(const std::string& job, int64_t step);

 private:
  // Sends `r`, reads the reply header; the fd is returned open for the
  // payload (closed on error).
  StatusOr<std::pair<int, Reply>> Call(const Request& r);
  const std::string endpoint_;
  const int timeout_ms_;
};

}  // namespace strata::checkpoint::mem
