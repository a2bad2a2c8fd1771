#include "bench/control_sim.h"

#include <poll.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <string>
#include <thread>
#include <vector>
#include <zmq.hpp>

#include "proto/control.pb.h"

namespace strata::bench {

double Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);  // shared by every process
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

void RaiseFdLimit() {
  rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) == 0) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
}

namespace {

struct SimWorker {
  std::unique_ptr<zmq::socket_t> sock;
  std::string id;
  std::vector<control::RankReport> ranks;
  double last_sent = 0;  // a registration or heartbeat, as liveness counts
  std::map<uint64_t, double> inflight;
  double orders_at = 0;
};

void Send(SimWorker& w, control::Request& req, uint64_t id) {
  req.set_protocol_version(control::PROTOCOL_VERSION_CURRENT);
  req.set_request_id(id);
  std::string bytes = req.SerializeAsString();
  w.sock->send(zmq::buffer(bytes), zmq::send_flags::dontwait);
  w.inflight[id] = w.last_sent = Now();
}

}  // namespace

// One child: simulates `count` workers; writes latencies (phase 1 and 2)
// and order arrival times to `out`. Reads its start time from `start_fd`.
int RunChild(const std::string& endpoint, int first, int count, int ready_fd,
             int start_fd, double seconds, double register_s,
             double handout_s, const std::string& out) {
  RaiseFdLimit();
  zmq::context_t ctx(1);
  ctx.set(zmq::ctxopt::max_sockets, count + 16);
  std::vector<SimWorker> workers(count);
  std::vector<zmq::pollitem_t> items;
  std::set<int> waiting;  // workers with a request in flight
  uint64_t next_id = 1;
  for (int i = 0; i < count; ++i) {
    workers[i].sock =
        std::make_unique<zmq::socket_t>(ctx, zmq::socket_type::dealer);
    workers[i].sock->set(zmq::sockopt::linger, 0);
    workers[i].sock->connect(endpoint);
    control::Request reg;
    auto* r = reg.mutable_register_worker();
    r->set_node_name("sim-" + std::to_string(first + i));
    r->set_address("10.1." + std::to_string((first + i) / 250) + "." +
                   std::to_string((first + i) % 250));
    auto* p = r->mutable_probe();
    p->set_hostname(r->node_name());
    p->set_cpu_cores(64);
    p->set_memory_bytes(1LL << 40);
    p->set_copy_gbps(20);
    p->set_cpu_gflops(50);
    Send(workers[i], reg, next_id++);
    waiting.insert(i);
  }
  std::vector<float> lat1, lat2;
  int registered = 0;
  double phase = 0;  // 0: registering, 1: steady, 2: handout
  double start = 0, end = 1e300;
  // Polls only the sockets with a request in flight (a handful at 1 Hz),
  // so the simulator's own cost stays small next to the coordinator's.
  std::vector<int> polled;
  auto handle_replies = [&](int timeout_ms) {
    polled.assign(waiting.begin(), waiting.end());
    items.clear();
    for (int i : polled) {
      items.push_back({workers[i].sock->handle(), 0, ZMQ_POLLIN, 0});
    }
    if (items.empty()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
      return;
    }
    zmq::poll(items.data(), items.size(),
              std::chrono::milliseconds(timeout_ms));
    for (size_t k = 0; k < polled.size(); ++k) {
      if (!(items[k].revents & ZMQ_POLLIN)) continue;
      SimWorker& w = workers[polled[k]];
      zmq::message_t msg;
      while (w.sock->recv(msg, zmq::recv_flags::dontwait)) {
        const double t = Now();
        control::Reply reply;
        if (!reply.ParseFromArray(msg.data(), msg.size())) continue;
        auto it = w.inflight.find(reply.request_id());
        if (it == w.inflight.end()) continue;
        const float ms = static_cast<float>((t - it->second) * 1e3);
        w.inflight.erase(it);
        if (w.inflight.empty()) waiting.erase(polled[k]);
        if (reply.has_register_worker()) {
          w.id = reply.register_worker().worker_id();
          ++registered;
          continue;
        }
        if (phase == 1) lat1.push_back(ms);
        if (phase == 2) lat2.push_back(ms);
        for (const auto& l : reply.heartbeat().launch()) {
          if (w.orders_at == 0) w.orders_at = t;
          control::RankReport rr;
          rr.set_job_id(l.job_id());
          rr.set_attempt(l.attempt());
          rr.set_rank(l.rank());
          rr.set_state(control::RANK_RUNNING);
          rr.set_pid(100000 + l.rank());
          w.ranks.push_back(rr);
        }
      }
    }
  };
  // Until the measured phase, registered workers heartbeat every second,
  // unmeasured, as real workers do from their registration on: otherwise
  // the first to register would be declared lost while the rest register
  // (and the coordinator's loss handling, not its heartbeat path, would
  // be measured).
  auto keep_alive = [&] {
    const double now = Now();
    for (int i = 0; i < count; ++i) {
      SimWorker& w = workers[i];
      if (w.id.empty() || now - w.last_sent < 1.0 || !w.inflight.empty())
        continue;
      control::Request hb;
      hb.mutable_heartbeat()->set_worker_id(w.id);
      Send(w, hb, next_id++);
      waiting.insert(i);
    }
  };
  const double reg_deadline = Now() + register_s;
  while (registered < count && Now() < reg_deadline) {
    handle_replies(50);
    keep_alive();
  }
  // How many registered (the rest go on trying, unmeasured).
  const int32_t done = registered;
  (void)!write(ready_fd, &done, sizeof(done));
  for (pollfd p{start_fd, POLLIN, 0}; poll(&p, 1, 0) == 0;) {
    handle_replies(50);
    keep_alive();
  }
  if (read(start_fd, &start, sizeof(start)) != sizeof(start)) return 1;
  const double submit_at = start + seconds;
  end = submit_at + handout_s;  // handout phase
  // Heartbeat schedule as a min-heap: O(log n) per send, no scans.
  using Due = std::pair<double, int>;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> schedule;
  for (int i = 0; i < count; ++i) {
    schedule.push({start + (double(i) + 0.5) / count, i});  // spread
  }
  while (true) {
    double now = Now();
    if (now >= end) break;
    phase = now < start ? 0 : now < submit_at ? 1 : 2;
    while (schedule.top().first <= now) {
      auto [t, i] = schedule.top();
      schedule.pop();
      SimWorker& w = workers[i];
      control::Request hb;
      hb.mutable_heartbeat()->set_worker_id(w.id);
      for (const auto& r : w.ranks) *hb.mutable_heartbeat()->add_ranks() = r;
      Send(w, hb, next_id++);
      waiting.insert(i);
      schedule.push({t + 1.0, i});
    }
    // At least 1 ms: with 2,048 workers per process the next heartbeat is
    // always due within a millisecond, and a 0 ms poll spun the simulator
    // at 1.1-1.4 cores of the machine's 2, starving the coordinator it
    // measures. A reply still wakes the poll at once; a heartbeat goes out
    // at most 1 ms late, and its round trip is timed from its send.
    int wait_ms =
        static_cast<int>(std::max(0.0, (schedule.top().first - Now()) * 1e3));
    handle_replies(std::clamp(wait_ms, 1, 20));
  }
  std::ofstream f(out);
  for (float v : lat1) f << "1 " << v << "\n";
  for (float v : lat2) f << "2 " << v << "\n";
  for (auto& w : workers) f << "o " << std::fixed << w.orders_at << "\n";
  return 0;
}

}  // namespace strata::bench
