#include "worker/rank_supervisor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "placement/rank_env.h"

extern char** environ;

namespace strata::worker {
namespace {

// A relayed piece ends at a newline unless this much is pending or the rank
// has exited (then the tail goes as is).
constexpr int64_t kMaxPartialLine = 64 << 10;

std::string Key(const std::string& job, int attempt) {
  return absl::StrCat(job, "/", attempt);
}

// PATH lookup before fork (execvp may allocate in the child).
std::string ResolveProgram(const std::string& prog) {
  if (prog.find('/') != std::string::npos) return prog;
  const char* path = getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", prog);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return prog;
}

int64_t FileSize(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

}  // namespace

RankSupervisor::RankSupervisor(std::string work_dir,
                               std::map<std::string, std::string> extra_env)
    : work_dir_(std::move(work_dir)),
      extra_env_(std::move(extra_env)),
      logger_(GetLogger("WORKER")) {}

RankSupervisor::~RankSupervisor() { StopAll(std::chrono::milliseconds(0)); }

void RankSupervisor::Launch(const control::RankLaunch& order) {
  Attempt& attempt = attempts_[Key(order.job_id(), order.attempt())];
  if (attempt.stop_requested || attempt.ranks.contains(order.rank())) return;
  Rank& rank = attempt.ranks[order.rank()];
  rank.report.set_job_id(order.job_id());
  rank.report.set_attempt(order.attempt());
  rank.report.set_rank(order.rank());
  const std::string dir = absl::StrCat(work_dir_, "/", order.job_id(),
                                       "/attempt-", order.attempt());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || order.command().empty()) {
    rank.report.set_state(control::RANK_FAILED_TO_START);
    rank.report.set_message(ec ? absl::StrCat("cannot create ", dir, ": ",
                                              ec.message())
                               : "empty command");
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
  if (!order.plan_json().empty()) {
    std::ofstream(plan_path) << order.plan_json();
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
  std::vector<std::string> env_strings, args(order.command().begin(),
                                             order.command().end());
  for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, argv;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string program = ResolveProgram(args[0]);

  int out_fd = open(rank.out.path.c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int err_fd = open(rank.err.path.c_str(),
                    O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int status_pipe[2] = {-1, -1};
  if (out_fd < 0 || err_fd < 0 || null_fd < 0 ||
      pipe2(status_pipe, O_CLOEXEC) != 0) {
    rank.report.set_state(control::RANK_FAILED_TO_START);
    rank.report.set_message(absl::StrCat("cannot open output files in ", dir,
                                         ": ", std::strerror(errno)));
    for (int fd : {out_fd, err_fd, null_fd}) {
      if (fd >= 0) close(fd);
    }
    return;
  }
  rank.out.sent = rank.out.pending = FileSize(rank.out.path);
  rank.err.sent = rank.err.pending = FileSize(rank.err.path);
  const pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // Child: async-signal-safe calls only until exec.
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // worker already gone
    dup2(null_fd, 0);
    dup2(out_fd, 1);
    dup2(err_fd, 2);
    signal(SIGPIPE, SIG_DFL);
    execve(program.c_str(), argv.data(), envp.data());
    int err = errno;
    (void)!write(status_pipe[1], &err, sizeof(err));
    _exit(127);
  }
  close(status_pipe[1]);
  for (int fd : {out_fd, err_fd, null_fd}) close(fd);
  if (pid < 0) {
    close(status_pipe[0]);
    rank.report.set_state(control::RANK_FAILED_TO_START);
    rank.report.set_message(absl::StrCat("fork: ", std::strerror(errno)));
    return;
  }
  setpgid(pid, pid);  // also from the parent, so killpg never races exec
  int exec_errno = 0;
  ssize_t n = read(status_pipe[0], &exec_errno, sizeof(exec_errno));
  close(status_pipe[0]);
  if (n == sizeof(exec_errno)) {
    waitpid(pid, nullptr, 0);
    rank.report.set_state(control::RANK_FAILED_TO_START);
    rank.report.set_message(absl::StrCat("exec ", program, ": ",
                                         std::strerror(exec_errno)));
    logger_->warn("rank {} of {}: {}", r, order.job_id(),
                  rank.report.message());
    return;
  }
  rank.report.set_state(control::RANK_RUNNING);
  rank.report.set_pid(pid);
  logger_->info("started rank {} of {} attempt {} as pid {}", r,
                order.job_id(), order.attempt(), pid);
}

void RankSupervisor::Stop(const std::string& attempt_key,
                          std::chrono::milliseconds grace) {
  auto it = attempts_.find(attempt_key);
  if (it == attempts_.end()) return;
  it->second.stop_requested = true;
  for (auto& [r, rank] : it->second.ranks) {
    if (rank.report.state() != control::RANK_RUNNING || rank.stopping) continue;
    rank.stopping = true;
    rank.kill_at = Clock::now() + grace;
    killpg(rank.report.pid(), SIGTERM);
    logger_->info("stopping rank {} of {} (pid {})", r, attempt_key,
                  rank.report.pid());
  }
}

void RankSupervisor::Poll() {
  const auto now = Clock::now();
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
      } else if (rank.stopping && now >= rank.kill_at) {
        killpg(pid, SIGKILL);
      }
    }
    if (all_done && it->second.stop_requested) {
      it = attempts_.erase(it);
      dirty_ = true;
    } else {
      ++it;
    }
  }
}

void RankSupervisor::StopAll(std::chrono::milliseconds grace) {
  for (auto& [key, attempt] : attempts_) Stop(key, grace);
  const auto deadline = Clock::now() + grace + std::chrono::seconds(5);
  while (running() > 0 && Clock::now() < deadline) {
    Poll();
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
        } else if (!exited && static_cast<int64_t>(data.size()) <
                                  kMaxPartialLine) {
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
