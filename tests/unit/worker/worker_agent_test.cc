// WorkerAgent stepped with a FakeClock against a fake coordinator (a
// control::Client answering like the real service: ids, reregister after a
// restart, launch and stop orders), fake ranks and fake telemetry. Each test
// asserts the calls the agent made, when, and what they carried.
#include "worker/worker_agent.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"

namespace strata::worker {
namespace {

constexpr char kEndpoint[] = "tcp://coord:7077";
constexpr int64_t kStart = 1'000'000;

// A coordinator in miniature. A call that finds it down takes the whole
// timeout (DeadlineExceeded, like DealerClient) unless `fail_fast`.
class FakeCoordinator : public control::Client {
 public:
  explicit FakeCoordinator(FakeClock* clock) : clock_(clock) {}

  StatusOr<control::Reply> Call(control::Request request,
                                int timeout_ms) override {
    calls.push_back({clock_->SteadyNowMs() - kStart, request, timeout_ms});
    if (down) {
      if (fail_fast) return absl::UnavailableError("send queue is full");
      clock_->Advance(timeout_ms);
      return absl::DeadlineExceededError(
          absl::StrCat("no reply within ", timeout_ms, " ms"));
    }
    control::Reply reply;
    if (request.has_register_worker()) {
      RETURN_IF_ERROR(reject_registration);
      const std::string id = absl::StrCat("worker-", ++registrations_);
      known.insert(id);
      reply.mutable_register_worker()->set_worker_id(id);
      reply.mutable_register_worker()->set_heartbeat_interval_ms(interval_ms);
      return reply;
    }
    auto* hb = reply.mutable_heartbeat();
    if (!known.contains(request.heartbeat().worker_id())) {
      hb->set_reregister(true);
      return reply;
    }
    for (auto& l : launch) *hb->add_launch() = l;
    for (auto& s : stop) hb->add_stop(s);
    hb->set_grace_ms(5000);
    launch.clear();
    stop.clear();
    return reply;
  }

  // Forgets every worker, as a coordinator restarted from disk does.
  void Restart() { known.clear(); }

  struct CallRecord {
    int64_t at_ms;  // since the start of the test
    control::Request request;
    int timeout_ms;
  };
  std::vector<CallRecord> calls;
  bool down = false, fail_fast = false;
  Status reject_registration;
  int64_t interval_ms = 1000;
  std::set<std::string> known;
  std::vector<control::RankLaunch> launch;  // sent with the next heartbeat
  std::vector<std::string> stop;            // sent with the next heartbeat

 private:
  FakeClock* clock_;
  int registrations_ = 0;
};

class FakeRanks : public RankRunner {
 public:
  void Launch(const control::RankLaunch& order) override {
    launched.push_back(order);
    control::RankReport& r =
        held[{order.job_id(), order.attempt(), order.rank()}];
    r.set_job_id(order.job_id());
    r.set_attempt(order.attempt());
    r.set_rank(order.rank());
    r.set_state(control::RANK_RUNNING);
    r.set_pid(4000 + order.rank());
    dirty_ = true;
  }
  // Forgets the attempt at once (as if its ranks exited on SIGTERM).
  void Stop(const std::string& key, int64_t grace_ms) override {
    stopped.push_back({key, grace_ms});
    std::erase_if(held, [&](const auto& kv) {
      return absl::StrCat(std::get<0>(kv.first), "/", std::get<1>(kv.first)) ==
             key;
    });
    dirty_ = true;
  }
  void Poll() override { ++polls; }
  std::vector<control::RankReport> Reports() const override {
    std::vector<control::RankReport> out;
    for (const auto& [key, r] : held) out.push_back(r);
    return out;
  }
  std::vector<control::LogChunk> CollectLogs(size_t) override { return output; }
  void CommitLogs() override {
    committed.insert(committed.end(), output.begin(), output.end());
    output.clear();
  }
  bool TakeDirty() override { return std::exchange(dirty_, false); }
  int running() const override {
    int n = 0;
    for (const auto& [key, r] : held) n += r.state() == control::RANK_RUNNING;
    return n;
  }

  void Exit(const std::string& job, int attempt, int rank, int code) {
    control::RankReport& r = held.at({job, attempt, rank});
    r.set_state(control::RANK_EXITED);
    r.set_exit_code(code);
    dirty_ = true;
  }

  std::map<std::tuple<std::string, int, int>, control::RankReport> held;
  std::vector<control::RankLaunch> launched;
  std::vector<std::pair<std::string, int64_t>> stopped;
  std::vector<control::LogChunk> output, committed;
  int polls = 0;

 private:
  bool dirty_ = false;
};

class FakeSteps : public StepSource {
 public:
  std::vector<control::StepReport> TakeChanged() override {
    return std::exchange(pending, {});
  }
  std::vector<control::StepReport> pending;
};

control::RankLaunch Order(const std::string& job, int attempt, int rank) {
  control::RankLaunch l;
  l.set_job_id(job);
  l.set_attempt(attempt);
  l.set_rank(rank);
  l.add_command("/bin/train");
  return l;
}

class WorkerAgentTest : public ::testing::Test {
 protected:
  WorkerAgentTest() : clock_(kStart), coordinator_(&clock_) {
    WorkerAgentOptions o;
    o.coordinator = kEndpoint;
    o.node_name = "node-a";
    o.address = "10.0.0.5";
    o.probe.set_hostname("host-a");
    o.probe.set_cpu_cores(8);
    o.coordinator_grace_ms = 600000;  // the default: 10 minutes
    o.retry_jitter = 0;  // exact call times; JitterSpreadsRetries checks it
    options_ = o;
    agent_ = std::make_unique<WorkerAgent>(&clock_, &coordinator_, &ranks_,
                                           &steps_, o, GetLogger("WORKER"));
  }

  void StepOk() {
    Status s = agent_->Step();
    ASSERT_TRUE(s.ok()) << s;
  }
  // Moves the clock to the next due report and steps.
  void StepWhenDue() {
    clock_.Advance(agent_->MsUntilNextReport());
    StepOk();
  }
  // Registers and fetches the first orders (two calls at the same instant).
  void Start() {
    StepOk();
    StepOk();
    ASSERT_EQ(coordinator_.calls.size(), 2u);
  }
  std::vector<int64_t> CallTimes() const {
    std::vector<int64_t> t;
    for (const auto& c : coordinator_.calls) t.push_back(c.at_ms);
    return t;
  }
  const control::Request& LastRequest() const {
    return coordinator_.calls.back().request;
  }

  // Rebuilds the agent with changed options.
  void Reset(const std::function<void(WorkerAgentOptions&)>& change) {
    change(options_);
    agent_ =
        std::make_unique<WorkerAgent>(&clock_, &coordinator_, &ranks_, &steps_,
                                      options_, GetLogger("WORKER"));
  }
  // Steps at each due report until `ms` have passed; all steps succeed.
  void RunFor(int64_t ms) {
    const int64_t end = clock_.SteadyNowMs() + ms;
    while (clock_.SteadyNowMs() < end) {
      clock_.Advance(
          std::min(agent_->MsUntilNextReport(), end - clock_.SteadyNowMs()));
      StepOk();
    }
  }

  FakeClock clock_;
  FakeCoordinator coordinator_;
  FakeRanks ranks_;
  FakeSteps steps_;
  WorkerAgentOptions options_;
  std::unique_ptr<WorkerAgent> agent_;
};

TEST_F(WorkerAgentTest, RegistersAtStartThenHeartbeatsAtTheInterval) {
  StepOk();
  ASSERT_EQ(coordinator_.calls.size(), 1u);
  const auto& reg = LastRequest().register_worker();
  EXPECT_EQ(reg.node_name(), "node-a");
  EXPECT_EQ(reg.address(), "10.0.0.5");
  EXPECT_EQ(reg.probe().hostname(), "host-a");
  EXPECT_EQ(reg.ranks_size(), 0);
  EXPECT_EQ(agent_->worker_id(), "worker-1");

  StepOk();  // orders are fetched right after registering
  ASSERT_EQ(coordinator_.calls.size(), 2u);
  EXPECT_EQ(LastRequest().heartbeat().worker_id(), "worker-1");
  EXPECT_EQ(coordinator_.calls.back().timeout_ms, 2000);  // 2 x interval

  StepOk();
  clock_.Advance(999);
  StepOk();
  EXPECT_EQ(coordinator_.calls.size(), 2u);  // not due yet
  clock_.Advance(1);
  StepOk();
  clock_.Advance(1000);
  StepOk();
  EXPECT_EQ(CallTimes(), (std::vector<int64_t>{0, 0, 1000, 2000}));
  EXPECT_EQ(ranks_.polls, 6);  // ranks are polled on every step
}

TEST_F(WorkerAgentTest, UsesTheIntervalTheCoordinatorSets) {
  coordinator_.interval_ms = 500;
  Start();
  EXPECT_EQ(agent_->heartbeat_interval_ms(), 500);
  StepWhenDue();
  StepWhenDue();
  EXPECT_EQ(CallTimes(), (std::vector<int64_t>{0, 0, 500, 1000}));
  EXPECT_EQ(coordinator_.calls.back().timeout_ms, 1000);
}

TEST_F(WorkerAgentTest, StartsTheRanksOfALaunchOrderAndReportsThemRunning) {
  coordinator_.launch = {Order("job-1", 0, 0), Order("job-1", 0, 1)};
  Start();
  ASSERT_EQ(ranks_.launched.size(), 2u);
  EXPECT_EQ(ranks_.launched[0].rank(), 0);
  EXPECT_EQ(ranks_.launched[1].rank(), 1);
  EXPECT_EQ(ranks_.launched[1].command(0), "/bin/train");

  StepOk();  // the state change is reported at once
  ASSERT_EQ(coordinator_.calls.size(), 3u);
  EXPECT_EQ(coordinator_.calls.back().at_ms, 0);
  const auto& hb = LastRequest().heartbeat();
  ASSERT_EQ(hb.ranks_size(), 2);
  EXPECT_EQ(hb.ranks(0).state(), control::RANK_RUNNING);
  EXPECT_EQ(hb.ranks(1).pid(), 4001);

  // While ranks run the worker reports every 200 ms.
  StepWhenDue();
  StepWhenDue();
  EXPECT_EQ(CallTimes(), (std::vector<int64_t>{0, 0, 0, 200, 400}));
}

TEST_F(WorkerAgentTest, ReportsARankExitAtOnce) {
  coordinator_.launch = {Order("job-1", 0, 0), Order("job-1", 0, 1)};
  Start();
  StepOk();
  clock_.Advance(50);
  ranks_.Exit("job-1", 0, 1, 3);
  StepOk();
  ASSERT_EQ(coordinator_.calls.size(), 4u);
  EXPECT_EQ(coordinator_.calls.back().at_ms, 50);  // not at 200
  const auto& hb = LastRequest().heartbeat();
  ASSERT_EQ(hb.ranks_size(), 2);
  EXPECT_EQ(hb.ranks(0).state(), control::RANK_RUNNING);
  EXPECT_EQ(hb.ranks(1).state(), control::RANK_EXITED);
  EXPECT_EQ(hb.ranks(1).exit_code(), 3);
}

TEST_F(WorkerAgentTest, StopOrderStopsTheAttemptWithTheGracePeriod) {
  coordinator_.launch = {Order("job-1", 0, 0)};
  Start();
  StepOk();
  coordinator_.stop = {"job-1/0"};  // the job was cancelled
  StepWhenDue();
  ASSERT_EQ(ranks_.stopped.size(), 1u);
  EXPECT_EQ(ranks_.stopped[0].first, "job-1/0");
  EXPECT_EQ(ranks_.stopped[0].second, 5000);
  StepOk();  // reported at once: the worker no longer holds the attempt
  EXPECT_EQ(LastRequest().heartbeat().ranks_size(), 0);
  // With nothing running it is back to the coordinator's interval.
  const size_t calls = coordinator_.calls.size();
  clock_.Advance(999);
  StepOk();
  EXPECT_EQ(coordinator_.calls.size(), calls);
  EXPECT_EQ(agent_->MsUntilNextReport(), 1);
}

TEST_F(WorkerAgentTest, ReRegistersWithItsRanksWhenTheCoordinatorForgetsIt) {
  coordinator_.launch = {Order("job-1", 0, 0)};
  Start();
  StepOk();
  coordinator_.Restart();
  StepWhenDue();  // answered with reregister
  EXPECT_TRUE(LastRequest().has_heartbeat());
  EXPECT_EQ(agent_->worker_id(), "");
  StepOk();  // registers again at once, listing the rank it still runs
  ASSERT_TRUE(LastRequest().has_register_worker());
  const auto& reg = LastRequest().register_worker();
  ASSERT_EQ(reg.ranks_size(), 1);
  EXPECT_EQ(reg.ranks(0).job_id(), "job-1");
  EXPECT_EQ(reg.ranks(0).state(), control::RANK_RUNNING);
  EXPECT_EQ(reg.ranks(0).pid(), 4000);
  EXPECT_EQ(agent_->worker_id(), "worker-2");
  StepOk();
  EXPECT_EQ(LastRequest().heartbeat().worker_id(), "worker-2");
  EXPECT_EQ(CallTimes(), (std::vector<int64_t>{0, 0, 0, 200, 200, 200}));
  EXPECT_EQ(ranks_.launched.size(), 1u);  // adopted, not relaunched
}

TEST_F(WorkerAgentTest, ReRegistersAfterTheCoordinatorRestarts) {
  coordinator_.launch = {Order("job-1", 0, 0)};
  Start();
  StepOk();
  coordinator_.down = true;  // killed
  StepWhenDue();             // at 200: times out after 2000 ms
  EXPECT_EQ(clock_.SteadyNowMs() - kStart, 2200);
  coordinator_.down = false;  // restarted from its state directory
  coordinator_.Restart();
  StepWhenDue();  // retry after 100 ms: reregister
  StepOk();       // registration
  ASSERT_TRUE(LastRequest().has_register_worker());
  EXPECT_EQ(LastRequest().register_worker().ranks_size(), 1);
  EXPECT_EQ(agent_->worker_id(), "worker-2");
  EXPECT_EQ(CallTimes(), (std::vector<int64_t>{0, 0, 0, 200, 2300, 2300}));
}

TEST_F(WorkerAgentTest, BacksOffUpToTheIntervalWhileUnreachable) {
  Start();
  coordinator_.down = true;
  coordinator_.fail_fast = true;
  RunFor(10000);
  // Retries 100, 200, 400, 800 ms apart, then at the heartbeat interval;
  // no giving up.
  EXPECT_EQ(CallTimes(),
            (std::vector<int64_t>{0, 0, 1000, 1100, 1300, 1700, 2500, 3500,
                                  4500, 5500, 6500, 7500, 8500, 9500}));
}

TEST_F(WorkerAgentTest, RanksOutliveA30sOutageAndAreReportedAsTheyRan) {
  coordinator_.launch = {Order("job-1", 0, 0), Order("job-1", 0, 1)};
  Start();
  StepOk();
  control::StepReport step;
  step.set_job_id("job-1");
  step.set_rank(1);
  step.set_step(41);
  steps_.pending = {step};
  StepWhenDue();             // accepted
  coordinator_.down = true;  // SIGSTOP: every call times out
  RunFor(30000);
  EXPECT_TRUE(ranks_.stopped.empty());
  EXPECT_EQ(ranks_.running(), 2);
  ranks_.Exit("job-1", 0, 0, 0);  // finished during the outage
  RunFor(1000);
  coordinator_.down = false;  // SIGCONT: the same coordinator
  RunFor(1000);
  const auto& hb = LastRequest().heartbeat();
  EXPECT_EQ(hb.worker_id(), "worker-1");  // still known: no re-registration
  ASSERT_EQ(hb.ranks_size(), 2);
  EXPECT_EQ(hb.ranks(0).state(), control::RANK_EXITED);
  EXPECT_EQ(hb.ranks(1).state(), control::RANK_RUNNING);
  EXPECT_EQ(hb.ranks(1).pid(), 4001);
  EXPECT_EQ(ranks_.launched.size(), 2u);
  EXPECT_TRUE(ranks_.stopped.empty());
}

TEST_F(WorkerAgentTest, RestartedCoordinatorLearnsTheRanksAndTheirSteps) {
  coordinator_.launch = {Order("job-1", 0, 0)};
  Start();
  StepOk();
  control::StepReport step;
  step.set_job_id("job-1");
  step.set_rank(0);
  step.set_step(1234);
  steps_.pending = {step};
  StepWhenDue();
  EXPECT_EQ(LastRequest().heartbeat().steps_size(), 1);
  StepWhenDue();
  EXPECT_EQ(LastRequest().heartbeat().steps_size(), 0);  // accepted
  coordinator_.down = true;
  RunFor(120000);  // two minutes without a coordinator
  coordinator_.down = false;
  coordinator_.Restart();  // a new process that loaded its state
  StepWhenDue();           // reregister
  StepOk();                // registration with the ranks held
  ASSERT_TRUE(LastRequest().has_register_worker());
  ASSERT_EQ(LastRequest().register_worker().ranks_size(), 1);
  EXPECT_EQ(LastRequest().register_worker().ranks(0).pid(), 4000);
  StepOk();  // first heartbeat: the step the rank had reached
  const auto& hb = LastRequest().heartbeat();
  ASSERT_EQ(hb.steps_size(), 1);
  EXPECT_EQ(hb.steps(0).step(), 1234);
  EXPECT_EQ(ranks_.launched.size(), 1u);
  EXPECT_TRUE(ranks_.stopped.empty());
}

TEST_F(WorkerAgentTest, GraceExpiryStopsTheRanksOnceAndKeepsRetrying) {
  Reset([](WorkerAgentOptions& o) { o.coordinator_grace_ms = 5000; });
  coordinator_.launch = {Order("job-1", 0, 0), Order("job-2", 3, 0)};
  Start();
  StepOk();
  coordinator_.down = coordinator_.fail_fast = true;
  RunFor(4900);
  EXPECT_TRUE(ranks_.stopped.empty());
  RunFor(1000);
  // Both attempts, with the grace the coordinator last sent.
  EXPECT_EQ(ranks_.stopped, (std::vector<std::pair<std::string, int64_t>>{
                                {"job-1/0", 5000}, {"job-2/3", 5000}}));
  const size_t calls = coordinator_.calls.size();
  RunFor(60000);  // still retrying, once per interval
  EXPECT_EQ(coordinator_.calls.size(), calls + 60);
  EXPECT_EQ(ranks_.stopped.size(), 2u);  // stopped once
  coordinator_.down = false;
  RunFor(1000);
  EXPECT_EQ(LastRequest().heartbeat().ranks_size(), 0);  // reports none
}

TEST_F(WorkerAgentTest, JitterSpreadsRetriesWithinTheBackoff) {
  Reset([](WorkerAgentOptions& o) {
    o.retry_jitter = 0.5;
    o.jitter_seed = 7;
  });
  Start();
  coordinator_.down = coordinator_.fail_fast = true;
  RunFor(20000);
  const auto t = CallTimes();
  std::set<int64_t> gaps;
  for (size_t i = 3; i < t.size(); ++i) {
    const int64_t gap = t[i] - t[i - 1];
    // Backoff 100 .. 1000 ms, cut by up to half.
    EXPECT_GE(gap, 50) << i;
    EXPECT_LE(gap, 1000) << i;
    if (i > 8) {
      EXPECT_GT(gap, 500) << i;  // at the cap: 500 .. 1000 ms
      gaps.insert(gap);
    }
  }
  EXPECT_GT(gaps.size(), 5u) << "retries are not spread";
}

TEST_F(WorkerAgentTest, RetriesCarryNoOutputAndCommitOnlyWhatWasSent) {
  coordinator_.launch = {Order("job-1", 0, 0)};
  Start();
  StepOk();
  control::LogChunk chunk;
  chunk.set_job_id("job-1");
  chunk.set_data("line\n");
  ranks_.output = {chunk};
  coordinator_.down = coordinator_.fail_fast = true;
  StepWhenDue();  // the first failed call did carry it
  EXPECT_EQ(LastRequest().heartbeat().logs_size(), 1);
  StepWhenDue();
  StepWhenDue();
  EXPECT_EQ(LastRequest().heartbeat().logs_size(), 0);  // retries do not
  coordinator_.down = false;
  StepWhenDue();  // answered: a report without output commits nothing
  EXPECT_EQ(LastRequest().heartbeat().logs_size(), 0);
  EXPECT_TRUE(ranks_.committed.empty());
  StepWhenDue();  // the output goes with the next one
  ASSERT_EQ(LastRequest().heartbeat().logs_size(), 1);
  EXPECT_EQ(ranks_.committed.size(), 1u);
}

TEST_F(WorkerAgentTest, BackoffResetsOnceTheCoordinatorAnswers) {
  Start();
  coordinator_.down = coordinator_.fail_fast = true;
  for (int i = 0; i < 3; ++i) StepWhenDue();  // at 1000, 1100, 1300
  coordinator_.down = false;
  StepWhenDue();  // at 1700: answered
  coordinator_.down = true;
  StepWhenDue();  // at 2700: fails
  StepWhenDue();  // first retry 100 ms later again
  EXPECT_EQ(CallTimes(),
            (std::vector<int64_t>{0, 0, 1000, 1100, 1300, 1700, 2700, 2800}));
}

TEST_F(WorkerAgentTest, RejectedRegistrationStopsTheWorker) {
  coordinator_.reject_registration =
      absl::InvalidArgumentError("probe.cpu_cores must be > 0");
  Status s = agent_->Step();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "coordinator at tcp://coord:7077 rejected the registration of "
            "node-a: probe.cpu_cores must be > 0");
}

TEST_F(WorkerAgentTest, OutputAndTelemetryAreDroppedOnlyOnceAccepted) {
  coordinator_.launch = {Order("job-1", 0, 0)};
  Start();
  StepOk();
  control::LogChunk chunk;
  chunk.set_job_id("job-1");
  chunk.set_data("step 7\n");
  ranks_.output = {chunk};
  control::StepReport step;
  step.set_job_id("job-1");
  step.set_rank(0);
  step.set_step(7);
  steps_.pending = {step};
  step.set_step(8);  // every step is relayed, in order
  StepOk();
  steps_.pending = {step};
  coordinator_.down = coordinator_.fail_fast = true;
  StepWhenDue();  // lost: nothing committed
  EXPECT_EQ(LastRequest().heartbeat().logs_size(), 1);
  EXPECT_TRUE(ranks_.committed.empty());
  coordinator_.down = false;
  StepWhenDue();  // telemetry sent again, accepted; output not in a retry
  const auto& hb = LastRequest().heartbeat();
  ASSERT_EQ(hb.steps_size(), 2);
  EXPECT_EQ(hb.steps(0).step(), 7);
  EXPECT_EQ(hb.steps(1).step(), 8);
  EXPECT_EQ(hb.logs_size(), 0);
  StepWhenDue();  // output sent again, accepted
  ASSERT_EQ(LastRequest().heartbeat().logs_size(), 1);
  EXPECT_EQ(LastRequest().heartbeat().logs(0).data(), "step 7\n");
  EXPECT_EQ(LastRequest().heartbeat().steps_size(), 0);
  ASSERT_EQ(ranks_.committed.size(), 1u);
  StepWhenDue();
  EXPECT_EQ(LastRequest().heartbeat().logs_size(), 0);
  EXPECT_EQ(LastRequest().heartbeat().steps_size(), 0);
}

// docs/security.md "Telemetry": what a rank writes to $STRATA_TELEMETRY is
// forwarded only for ranks this worker started (issue 30, finding 2: a rank
// of one job pushing reports for another job through its own worker).
TEST_F(WorkerAgentTest, ForwardsStepsOnlyOfRanksItStarted) {
  coordinator_.launch = {Order("job-1", 0, 0)};
  Start();
  StepOk();
  control::StepReport mine;
  mine.set_job_id("job-1");
  mine.set_rank(0);
  mine.set_step(3);
  control::StepReport forged = mine;
  forged.set_job_id("job-2");
  control::StepReport other_rank = mine;
  other_rank.set_rank(5);
  steps_.pending = {forged, mine, other_rank};
  StepWhenDue();
  const auto& hb = LastRequest().heartbeat();
  ASSERT_EQ(hb.steps_size(), 1);
  EXPECT_EQ(hb.steps(0).job_id(), "job-1");
  EXPECT_EQ(hb.steps(0).rank(), 0);
}

}  // namespace
}  // namespace strata::worker
