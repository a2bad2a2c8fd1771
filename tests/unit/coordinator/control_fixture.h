// A coordinator's state services over a real RocksDB in a temporary
// directory, driven by a FakeClock: what handler and job tests build on.
#pragma once

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "coordinator/server/service.h"

namespace strata::coordinator {

class ControlFixture {
 public:
  explicit ControlFixture(JobOptions options = {.default_worker_wait_ms = 10000,
                                                .default_grace_ms = 100,
                                                .limits = {},
                                                .rank_keys = nullptr,
                                                .retention = {}}) {
    static std::atomic<int> counter{0};
    dir_ = std::filesystem::temp_directory_path() /
           ("strata-ctl-" + std::to_string(getpid()) + "-" +
            std::to_string(counter++));
    std::filesystem::remove_all(dir_);
    options_ = options;
    Open();
  }
  ~ControlFixture() {
    Close();
    std::filesystem::remove_all(dir_);
  }

  // Simulates a coordinator restart: drops every in-memory structure and
  // recovers from the same directory.
  void Restart() {
    Close();
    Open();
  }

  FakeClock clock;
  std::unique_ptr<StateStore> store;
  std::unique_ptr<EventLog> events;
  std::unique_ptr<LogStore> logs;
  std::unique_ptr<KvStore> kv;
  std::unique_ptr<JobManager> jobs;
  std::unique_ptr<Service> service;
  Status recovered;

 private:
  void Open() {
    store = std::move(*StateStore::Open((dir_ / "db").string()));
    events = std::make_unique<EventLog>(&clock, store.get());
    logs = std::make_unique<LogStore>((dir_ / "logs").string());
    kv = std::make_unique<KvStore>(store.get());
    jobs = std::make_unique<JobManager>(&clock, store.get(), events.get(),
                                        logs.get(), kv.get(), options_);
    recovered = events->Recover();
    if (recovered.ok()) recovered = kv->Recover();
    if (recovered.ok()) recovered = jobs->Recover();
    service = std::make_unique<Service>(
        &clock,
        RegistryOptions{.heartbeat_interval_ms = 1000, .lost_after_ms = 3000},
        Services{.jobs = jobs.get(),
                 .kv = kv.get(),
                 .events = events.get(),
                 .logs = logs.get()});
  }
  void Close() {
    service.reset();
    jobs.reset();
    kv.reset();
    logs.reset();
    events.reset();
    store.reset();
  }

  std::filesystem::path dir_;
  JobOptions options_;
};

}  // namespace strata::coordinator
