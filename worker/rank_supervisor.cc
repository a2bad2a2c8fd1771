#include "worker/rank_supervisor.h"

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "checkpoint/mem_wire.h"
#include "comm/flight_recorder.h"
#include "common/subprocess.h"
#include "control/codec.h"
#include "control/curve_config.h"
#include "worker/private_dir.h"
#include "placement/rank_env.h"

extern char** environ;

namespace strata::worker {
namespace {

// A relayed piece ends at a newline unless this much is pending or the rank
// has exited (then the tail goes as is).
constexpr int64_t kMaxPartialLine = 64 << 10;

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

}  // namespace

RankSupervisor::RankSupervisor(const Clock* clock, std::string work_dir,
                               std::map<std::string, std::string> extra_env)
    : clock_(clock),
      work_dir_(std::move(work_dir)),
      extra_env_(std::move(extra_env)),
      logger_(GetLogger("WORKER")) {}

RankSupervisor::~RankSupervisor() { StopAll(0); }

StatusOr<RankUser> LookUpRankUser(const std::string& name) {
  std::vector<char> buf(16384);
  struct passwd pw, *found = nullptr;
  const int err = getpwnam_r(name.c_str(), &pw, buf.data(), buf.size(), &found);
  if (err != 0 || found == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank-user: no user '", name, "'",
        err != 0 ? absl::StrCat(" (", std::strerror(err), ")") : ""));
  }
  if (pw.pw_uid == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--rank-user: '", name, "' is root; name a less privileged user"));
  }
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "--rank-user ", name, ": only a worker running as root can start "
        "ranks as another user (this one runs as uid ", geteuid(), ")"));
  }
  return RankUser{name, pw.pw_uid, pw.pw_gid};
}

Status RankSupervisor::SetRankUser(RankUser user) {
  RETURN_IF_ERROR(OpenToGroup(work_dir_, user.gid));
  // The telemetry socket: a rank connects to it, which takes write
  // permission. It sits in the worker's private work dir, so checking it
  // by name is safe from other users.
  auto ep = extra_env_.find(placement::kTelemetry);
  if (ep != extra_env_.end() && ep->second.starts_with("ipc://")) {
    const std::string path = ep->second.substr(6);
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) ||
        st.st_uid != geteuid()) {
      return absl::FailedPreconditionError(
          absl::StrCat("telemetry socket ", path,
                       " is missing, not a socket or not the worker's"));
    }
    if (lchown(path.c_str(), static_cast<uid_t>(-1), user.gid) != 0 ||
        chmod(path.c_str(), 0660) != 0) {
      return ErrnoToStatus(errno, "opening the telemetry socket " + path +
                                      " to group " + std::to_string(user.gid));
    }
  }
  logger_->info("ranks will run as user {} (uid {} gid {})", user.name,
                user.uid, user.gid);
  rank_user_ = std::move(user);
  return absl::OkStatus();
}

void RankSupervisor::Launch(const control::RankLaunch& order) {
  Attempt& attempt =
      attempts_[control::AttemptKey(order.job_id(), order.attempt())];
  if (attempt.stop_requested || attempt.ranks.contains(order.rank())) return;
  Rank& rank = attempt.ranks[order.rank()];
  rank.report.set_generation(order.generation());
  rank.report.set_job_id(order.job_id());
  rank.report.set_attempt(order.attempt());
  rank.report.set_rank(order.rank());
  const std::string dir = absl::StrCat(work_dir_, "/", order.job_id(),
                                       "/attempt-", order.attempt());
  Status made = MakePrivateDir(dir);
  if (made.ok() && rank_user_) made = OpenToGroup(dir, rank_user_->gid);
  if (!made.ok() || order.command().empty()) {
    rank.report.set_state(control::RANK_FAILED_TO_START);
    rank.report.set_message(made.ok() ? "empty command"
                                      : std::string(made.message()));
    dirty_ = true;
    return;
  }
  Start(rank, order, dir);
  dirty_ = true;
}

void RankSupervisor::Start(Rank& rank, const control::RankLaunch& order,
                           const std::string& dir) {
  const int r = order.rank();
  rank.out.path = absl::StrCat(dir, "/rank-", r, ".stdout");
  rank.err.path = absl::StrCat(dir, "/rank-", r, ".stderr");
  const std::string plan_path = absl::StrCat(dir, "/plan.json");
  Status prepared = absl::OkStatus();
  if (!order.plan_json().empty()) {
    prepared = WritePrivateFile(plan_path, order.plan_json(), 0600);
    if (prepared.ok() && rank_user_) {
      prepared = OpenToGroup(plan_path, rank_user_->gid);
    }
  }
  // The rank's own CURVE keys (docs/security.md "Ranks"): never the
  // worker's. Without them (plaintext) the rank gets no curve dir at all.
  std::string curve_dir;
  if (prepared.ok() && !order.curve_secret_key().empty() &&
      !curve_server_key_.empty()) {
    curve_dir = absl::StrCat(dir, "/rank-", r, ".curve");
    if (rank_user_) {
      // A rank restarted in place left it to the rank's user: the worker
      // takes it back before writing in it, so nobody can race the writes.
      Status back = HandTo(curve_dir, geteuid(), getegid());
      if (!back.ok() && !absl::IsNotFound(back)) prepared = back;
    }
    if (prepared.ok()) prepared = MakePrivateDir(curve_dir);
    for (const char* f : {"/client.key", "/client.key_secret", "/server.key"}) {
      unlink((curve_dir + f).c_str());  // a rank restarted in place
    }
    if (prepared.ok()) {
      prepared = control::WriteKeyPair(
          curve_dir, control::kClientKeyName,
          {order.curve_public_key(), order.curve_secret_key()});
    }
    if (prepared.ok()) {
      prepared = control::WritePublicKeyFile(
          absl::StrCat(curve_dir, "/", control::kServerKeyName,
                       control::kPublicKeySuffix),
          curve_server_key_, "strata coordinator public key");
    }
    if (rank_user_) {
      // The rank's key loader accepts only keys its own user owns, 0600
      // (control/curve_keys.h): the files, then the dir, become the user's.
      for (const char* f : {"/client.key", "/client.key_secret",
                            "/server.key", ""}) {
        if (prepared.ok()) {
          prepared = HandTo(curve_dir + f, rank_user_->uid, rank_user_->gid);
        }
      }
    }
  }
  std::string own_dir;
  if (prepared.ok() && rank_user_) {
    own_dir = absl::StrCat(dir, "/rank-", r, ".tmp");
    prepared = MakeDirFor(own_dir, rank_user_->uid, rank_user_->gid);
  }
  // The job's memory-tier directory (docs/checkpoint.md "Memory tier").
  // One that cannot be made ours (left by another worker or user of this
  // host's /dev/shm under the same job id) costs the job its memory tier,
  // not its start: the rank gets no STRATA_MEM_DIR, so its mem:// saves
  // fail with that reason and recovery uses the durable tier.
  std::string job_mem_dir;
  if (prepared.ok() && !mem_dir_.empty()) {
    job_mem_dir = absl::StrCat(mem_dir_, "/", order.job_id());
    Status mem = rank_user_ ? MakeDirFor(job_mem_dir, rank_user_->uid,
                                         rank_user_->gid)
                            : MakePrivateDir(job_mem_dir);
    if (!mem.ok()) {
      logger_->warn("rank {} of {}: no memory tier: {}", r, order.job_id(),
                    std::string(mem.message()));
      if (mem_refused_) {
        mem_refused_(order.job_id(),
                     absl::StrCat("rank ", r, ": no memory tier: ",
                                  mem.message()));
      }
      job_mem_dir.clear();
    }
  }
  if (!prepared.ok()) {
    rank.report.set_state(control::RANK_FAILED_TO_START);
    rank.report.set_message(std::string(prepared.message()));
    logger_->warn("rank {} of {}: {}", r, order.job_id(),
                  rank.report.message());
    return;
  }
  // Environment: the worker's, then the order's, then the worker's own
  // endpoints; later entries win.
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : order.env()) env[k] = v;
  for (const auto& [k, v] : extra_env_) env[k] = v;
  env[placement::kPlan] = plan_path;
  if (!job_mem_dir.empty()) env[checkpoint::mem::kMemDirEnv] = job_mem_dir;
  // Whatever curve dir the worker's environment or the job named, the rank
  // gets only its own.
  env.erase(control::kCurveDirEnv);
  if (!curve_dir.empty()) env[control::kCurveDirEnv] = curve_dir;
  SubprocessOptions sub;
  if (rank_user_) {
    env["TMPDIR"] = own_dir;
    sub.user = SubprocessOptions::User{rank_user_->uid, rank_user_->gid};
  }
  sub.argv.assign(order.command().begin(), order.command().end());
  sub.env.emplace();
  for (const auto& [k, v] : env) sub.env->push_back(k + "=" + v);
  sub.in.path = "/dev/null";
  sub.out.path = rank.out.path;
  sub.err.path = rank.err.path;
  rank.out.sent = rank.out.pending = FileSize(rank.out.path);
  rank.err.sent = rank.err.pending = FileSize(rank.err.path);
  auto pid = StartSubprocess(sub);
  if (!pid.ok()) {
    rank.report.set_state(control::RANK_FAILED_TO_START);
    rank.report.set_message(std::string(pid.status().message()));
    logger_->warn("rank {} of {}: {}", r, order.job_id(),
                  rank.report.message());
    return;
  }
  rank.report.set_state(control::RANK_RUNNING);
  rank.report.set_pid(*pid);
  logger_->info("started rank {} of {} attempt {} as pid {}", r, order.job_id(),
                order.attempt(), *pid);
}

void RankSupervisor::Stop(const std::string& attempt_key, int64_t grace_ms) {
  auto it = attempts_.find(attempt_key);
  if (it == attempts_.end()) return;
  it->second.stop_requested = true;
  for (auto& [r, rank] : it->second.ranks) {
    if (rank.report.state() != control::RANK_RUNNING || rank.stopping) continue;
    rank.stopping = true;
    rank.kill_at_ms = clock_->SteadyNowMs() + grace_ms;
    killpg(rank.report.pid(), SIGTERM);
    // A stopped rank (SIGSTOP, a hang being diagnosed) handles SIGTERM only
    // once continued; without this it would sit out the whole grace (as
    // systemd sends SIGCONT after SIGTERM).
    killpg(rank.report.pid(), SIGCONT);
    logger_->info("stopping rank {} of {} (pid {})", r, attempt_key,
                  rank.report.pid());
  }
}

void RankSupervisor::Replace(const control::RankLaunch& order) {
  auto it = attempts_.find(control::AttemptKey(order.job_id(), order.attempt()));
  // An attempt this worker does not hold: a spare taking a lost node's
  // ranks in place (docs/fault.md "Node loss in place") starts them.
  if (it == attempts_.end()) return Launch(order);
  if (it->second.stop_requested) return;
  auto r = it->second.ranks.find(order.rank());
  if (r != it->second.ranks.end()) {
    Rank& rank = r->second;
    if (rank.report.generation() >= order.generation()) return;
    const pid_t pid = rank.report.pid();
    if (rank.report.state() == control::RANK_RUNNING && pid > 0) {
      killpg(pid, SIGKILL);
      killpg(pid, SIGCONT);  // a stopped (hung) process dies only once run
      // Real time, not the injected clock: this loop waits on the kernel.
      const auto until = std::chrono::steady_clock::now() +
                         std::chrono::milliseconds(kReplaceReapMs);
      int status = 0;
      while (waitpid(pid, &status, WNOHANG) != pid) {
        if (std::chrono::steady_clock::now() >= until) {
          logger_->warn("rank {} of {} (pid {}) not reaped within {} ms of "
                        "SIGKILL; starting its replacement anyway",
                        order.rank(), it->first, pid, kReplaceReapMs);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    if (pid > 0) {
      unlink(comm::FlightRecorderPath(order.job_id(), order.rank(), pid)
                 .c_str());
    }
    logger_->info("replacing rank {} of {} (pid {}) in place, generation {}",
                  order.rank(), it->first, pid, order.generation());
    it->second.ranks.erase(r);
  }
  Launch(order);
}

void RankSupervisor::Poll() {
  const int64_t now = clock_->SteadyNowMs();
  for (auto it = attempts_.begin(); it != attempts_.end();) {
    bool all_done = true;
    for (auto& [r, rank] : it->second.ranks) {
      if (rank.report.state() != control::RANK_RUNNING) {
        all_done = all_done && Flushed(rank);
        continue;
      }
      all_done = false;
      int status = 0;
      pid_t pid = rank.report.pid();
      if (waitpid(pid, &status, WNOHANG) == pid) {
        rank.report.set_state(control::RANK_EXITED);
        if (WIFSIGNALED(status)) {
          rank.report.set_signal(WTERMSIG(status));
        } else {
          rank.report.set_exit_code(WEXITSTATUS(status));
        }
        // Children the rank left in its group do not outlive it.
        killpg(pid, SIGKILL);
        dirty_ = true;
        logger_->info("rank {} of {} (pid {}) exited: code {} signal {}", r,
                      it->first, pid, rank.report.exit_code(),
                      rank.report.signal());
      } else if (rank.stopping && now >= rank.kill_at_ms) {
        killpg(pid, SIGKILL);
      }
    }
    if (all_done && it->second.stop_requested) {
      // The attempt is forgotten: so are its ranks' flight recorders (kept
      // until now for a diagnosis after a crash).
      for (const auto& [r, rank] : it->second.ranks) {
        if (rank.report.pid() > 0) {
          unlink(comm::FlightRecorderPath(rank.report.job_id(), r,
                                          rank.report.pid())
                     .c_str());
        }
      }
      it = attempts_.erase(it);
      dirty_ = true;
    } else {
      ++it;
    }
  }
}

void RankSupervisor::StopAll(int64_t grace_ms) {
  for (auto& [key, attempt] : attempts_) Stop(key, grace_ms);
  const int64_t give_up = clock_->SteadyNowMs() + grace_ms + 5000;
  while (true) {
    Poll();
    if (running() == 0 || clock_->SteadyNowMs() >= give_up) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

bool RankSupervisor::Flushed(const Rank& rank) const {
  return rank.out.path.empty() || (FileSize(rank.out.path) == rank.out.sent &&
                                   FileSize(rank.err.path) == rank.err.sent);
}

std::vector<control::RankReport> RankSupervisor::Reports() const {
  std::vector<control::RankReport> out;
  for (const auto& [key, attempt] : attempts_) {
    for (const auto& [r, rank] : attempt.ranks) out.push_back(rank.report);
  }
  return out;
}

std::vector<control::LogChunk> RankSupervisor::CollectLogs(size_t max_bytes) {
  std::vector<control::LogChunk> chunks;
  size_t total = 0;
  for (auto& [key, attempt] : attempts_) {
    for (auto& [r, rank] : attempt.ranks) {
      const bool exited = rank.report.state() != control::RANK_RUNNING;
      for (Stream* s : {&rank.out, &rank.err}) {
        s->pending = s->sent;
        if (s->path.empty() || total >= max_bytes) continue;
        int64_t size = FileSize(s->path);
        if (size <= s->sent) continue;
        int64_t n = std::min<int64_t>(size - s->sent, max_bytes - total);
        std::string data(static_cast<size_t>(n), '\0');
        std::ifstream in(s->path, std::ios::binary);
        in.seekg(s->sent);
        in.read(data.data(), n);
        data.resize(static_cast<size_t>(in.gcount()));
        size_t cut = data.rfind('\n');
        if (cut != std::string::npos) {
          data.resize(cut + 1);
        } else if (!exited &&
                   static_cast<int64_t>(data.size()) < kMaxPartialLine) {
          continue;  // wait for the rest of the line
        }
        if (data.empty()) continue;
        s->pending = s->sent + static_cast<int64_t>(data.size());
        total += data.size();
        control::LogChunk& c = chunks.emplace_back();
        c.set_job_id(rank.report.job_id());
        c.set_attempt(rank.report.attempt());
        c.set_rank(r);
        c.set_stderr(s == &rank.err);
        c.set_data(std::move(data));
      }
    }
  }
  return chunks;
}

void RankSupervisor::CommitLogs() {
  for (auto& [key, attempt] : attempts_) {
    for (auto& [r, rank] : attempt.ranks) {
      rank.out.sent = rank.out.pending;
      rank.err.sent = rank.err.pending;
    }
  }
}

bool RankSupervisor::TakeDirty() {
  bool d = dirty_;
  dirty_ = false;
  return d;
}

int RankSupervisor::running() const {
  int n = 0;
  for (const auto& [key, attempt] : attempts_) {
    for (const auto& [r, rank] : attempt.ranks) {
      n += rank.report.state() == control::RANK_RUNNING ? 1 : 0;
    }
  }
  return n;
}

}  // namespace strata::worker
