#include "coordinator/jobs/placement_task.h"

#include "absl/strings/str_cat.h"
#include "coordinator/jobs/attempt_plan.h"
#include "coordinator/jobs/job_limits.h"

namespace strata::coordinator {

namespace {

// The record of the attempt placed on `in.nodes` with `plan`, RUNNING.
control::JobInfo Placed(const PlacementSnapshot& in, const Plan& plan) {
  control::JobInfo next = in.job;
  next.clear_spare_workers();
  for (const auto& id : in.spares) next.add_spare_workers(id);
  *next.mutable_plan() = plan;
  next.clear_nodes();
  next.clear_node_info();
  for (const auto& w : in.nodes) {
    next.add_nodes(w.worker_id());
    control::WorkerInfo* n = next.add_node_info();
    *n = w;
    n->clear_holds();
  }
  next.set_master_port(in.port);
  next.clear_ranks();
  next.mutable_ranks()->Reserve(plan.placement().ranks_size());
  for (int r = 0; r < plan.placement().ranks_size(); ++r) {
    control::RankReport* rr = next.add_ranks();
    rr->set_job_id(in.job.job_id());
    rr->set_attempt(in.job.attempt());
    rr->set_rank(r);
  }
  next.set_state(control::RUNNING);
  next.set_start_unix_ms(in.now_ms);
  return next;
}

}  // namespace

control::JobInfo LightCopy(control::JobInfo& job) {
  control::JobInfo held;
  held.mutable_nodes()->Swap(job.mutable_nodes());
  held.mutable_node_info()->Swap(job.mutable_node_info());
  held.mutable_ranks()->Swap(job.mutable_ranks());
  const bool had_plan = job.has_plan();
  if (had_plan) held.mutable_plan()->Swap(job.mutable_plan());
  control::JobInfo light = job;
  light.clear_plan();  // the swapped-out plan left an empty one behind
  job.mutable_nodes()->Swap(held.mutable_nodes());
  job.mutable_node_info()->Swap(held.mutable_node_info());
  job.mutable_ranks()->Swap(held.mutable_ranks());
  if (had_plan) job.mutable_plan()->Swap(held.mutable_plan());
  return light;
}

PlacedAttempt ComputePlacement(const PlacementSnapshot& in) {
  PlacedAttempt out;
  StatusOr<Plan> plan = in.plan.has_value()
                            ? StatusOr<Plan>(*in.plan)
                            : PlanAttempt(in.job.spec(), in.nodes,
                                          in.node_speed, in.compute_scale);
  if (plan.ok() && !in.plan.has_value()) {
    Status fits = CheckLaunchOrderSize(in.job.spec(), in.per_node,
                                       PlanFileJson(*plan).size());
    if (!fits.ok()) plan = fits;
  }
  if (!plan.ok()) {
    out.status = plan.status();
    return out;
  }
  out.record = Placed(in, *plan);
  out.bytes = out.record.SerializeAsString();
  out.index = BuildAttemptIndex(out.record);
  return out;
}

PlacementWorker::PlacementWorker() : thread_([this] { Run(); }) {}

PlacementWorker::~PlacementWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

std::shared_ptr<PlacementTask> PlacementWorker::Start(
    PlacementSnapshot snapshot) {
  auto task = std::make_shared<PlacementTask>(std::move(snapshot));
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(task);
  }
  cv_.notify_all();
  return task;
}

void PlacementWorker::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_ || (queue_.empty() && !busy_); });
}

void PlacementWorker::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (stop_) return;
    std::shared_ptr<PlacementTask> task = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lock.unlock();
    task->out = ComputePlacement(task->in);
    task->finished.store(true, std::memory_order_release);
    lock.lock();
    busy_ = false;
    cv_.notify_all();  // Drain()
  }
}

}  // namespace strata::coordinator
