#include "fault/inject/inject.h"

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::fault {
namespace {

using Steady = std::chrono::steady_clock;

// NUL-separated KEY=VALUE pairs of /proc/PID/environ; empty when unreadable
// (the process is gone or not ours to read).
std::string Environ(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/environ"), std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

bool HasVar(const std::string& env, const std::string& kv) {
  const std::string needle = kv + '\0';
  return env.rfind(needle, 0) == 0 ||
         env.find('\0' + needle) != std::string::npos;
}

Status Signal(pid_t pid, int sig) {
  if (kill(pid, sig) == 0 || errno == ESRCH) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("cannot signal process ", pid,
                                                  " (", strsignal(sig),
                                                  "): ", std::strerror(errno)));
}

void SignalAll(const std::vector<pid_t>& pids, int sig) {
  for (pid_t p : pids) (void)kill(p, sig);
}

bool AnyAlive(const std::vector<pid_t>& pids) {
  for (pid_t p : pids) {
    if (kill(p, 0) == 0) return true;
  }
  return false;
}

// Sleeps `ms` or until `stop`, in slices of at most 10 ms.
void Wait(int64_t ms, const std::atomic<bool>& stop) {
  const auto end = Steady::now() + std::chrono::milliseconds(ms);
  while (!stop && Steady::now() < end) {
    std::this_thread::sleep_for(std::min<Steady::duration>(
        end - Steady::now(), std::chrono::milliseconds(10)));
  }
}

}  // namespace

namespace {

// The parent pid (/proc/PID/stat field 4, after the parenthesised comm,
// which may itself hold ')': proc(5)); -1 when gone.
pid_t ParentOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), {});
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

// The file name of /proc/PID/exe ("" when unreadable).
std::string ExeName(pid_t pid) {
  char buf[4096];
  const ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), buf,
                             sizeof(buf) - 1);
  if (n <= 0) return "";
  std::string path(buf, static_cast<size_t>(n));
  if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string DescribeProcess(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/cmdline"), std::ios::binary);
  std::string cmd((std::istreambuf_iterator<char>(in)), {});
  for (char& c : cmd) c = c == '\0' ? ' ' : c;
  while (!cmd.empty() && cmd.back() == ' ') cmd.pop_back();
  if (cmd.size() > 120) cmd = cmd.substr(0, 117) + "...";
  struct stat st;
  const std::string uid =
      stat(absl::StrCat("/proc/", pid).c_str(), &st) == 0
          ? absl::StrCat(st.st_uid)
          : "?";
  const pid_t parent = ParentOf(pid);
  return absl::StrCat("pid ", pid, " (uid ", uid, ", `", cmd, "`, child of ",
                      ExeName(parent), " pid ", parent, ")");
}

StatusOr<std::vector<pid_t>> FindRank(const std::string& job_id, int rank,
                                      const std::string& started_by) {
  DIR* proc = opendir("/proc");
  if (proc == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("cannot list /proc: ", std::strerror(errno)));
  }
  std::vector<pid_t> pids;
  const pid_t self = getpid();
  while (dirent* e = readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid == self) continue;
    const std::string env = Environ(pid);
    if (HasVar(env, "STRATA_JOB_ID=" + job_id) &&
        HasVar(env, absl::StrCat("RANK=", rank)) &&
        (started_by.empty() || ExeName(ParentOf(pid)) == started_by)) {
      pids.push_back(pid);
    }
  }
  closedir(proc);
  if (pids.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no process with STRATA_JOB_ID=", job_id, " and RANK=", rank,
        started_by.empty() ? "" : absl::StrCat(" started by ", started_by),
        " on this machine"));
  }
  if (!started_by.empty() && pids.size() > 1) {
    std::vector<std::string> names;
    for (pid_t p : pids) names.push_back(DescribeProcess(p));
    return absl::FailedPreconditionError(absl::StrCat(
        "rank ", rank, " of ", job_id, " is ambiguous: ",
        absl::StrJoin(names, "; "),
        ". Nothing signalled; name one with --pid"));
  }
  return pids;
}

namespace {

// The duty cycle of Slow and SlowChildren: each period stops the processes
// `targets` returns, while `alive`.
StatusOr<int64_t> DutyCycle(const std::function<std::vector<pid_t>()>& targets,
                            const std::function<bool()>& alive,
                            const SlowOptions& o,
                            const std::atomic<bool>& stop) {
  if (!(o.factor > 1) || o.factor > 1000) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slowdown factor ", o.factor, " is out of range (1, 1000]"));
  }
  if (o.period_ms < 2 || o.period_ms > 60'000) {
    return absl::InvalidArgumentError(
        absl::StrCat("period ", o.period_ms, " ms is out of range [2, 60000]"));
  }
  const int64_t run_ms =
      std::max<int64_t>(1, static_cast<int64_t>(o.period_ms / o.factor + 0.5));
  const int64_t stop_ms = o.period_ms - run_ms;
  const auto start = Steady::now();
  auto elapsed_ms = [&] {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Steady::now() -
                                                                 start)
        .count();
  };
  int64_t stopped_ms = 0;
  Status st;
  std::vector<pid_t> pids;
  while (!stop && alive() &&
         (o.duration_ms < 0 || elapsed_ms() < o.duration_ms)) {
    pids = targets();
    for (pid_t p : pids) {
      st = Signal(p, SIGSTOP);
      if (!st.ok()) break;
    }
    if (!st.ok()) break;
    const auto t0 = Steady::now();
    Wait(stop_ms, stop);
    SignalAll(pids, SIGCONT);
    stopped_ms += std::chrono::duration_cast<std::chrono::milliseconds>(
                      Steady::now() - t0)
                      .count();
    Wait(run_ms, stop);
  }
  SignalAll(pids, SIGCONT);
  if (!st.ok()) return st;
  return stopped_ms;
}

}  // namespace

StatusOr<int64_t> Slow(const std::vector<pid_t>& pids, const SlowOptions& o,
                       const std::atomic<bool>& stop) {
  return DutyCycle([&] { return pids; }, [&] { return AnyAlive(pids); }, o,
                   stop);
}

std::vector<pid_t> Descendants(pid_t root) {
  std::map<pid_t, std::vector<pid_t>> children;
  if (DIR* proc = opendir("/proc")) {
    while (dirent* e = readdir(proc)) {
      int pid = 0;
      if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
      std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
      std::string stat((std::istreambuf_iterator<char>(in)), {});
      // "pid (comm) state ppid ...": comm may hold spaces and parentheses.
      const size_t close = stat.rfind(')');
      if (close == std::string::npos) continue;
      std::istringstream rest(stat.substr(close + 1));
      std::string state;
      pid_t ppid = 0;
      if (rest >> state >> ppid) children[ppid].push_back(pid);
    }
    closedir(proc);
  }
  std::vector<pid_t> out;
  std::vector<pid_t> todo = {root};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    for (pid_t c : children[p]) {
      out.push_back(c);
      todo.push_back(c);
    }
  }
  return out;
}

StatusOr<int64_t> SlowChildren(pid_t root, const SlowOptions& o,
                               const std::atomic<bool>& stop) {
  return DutyCycle([&] { return Descendants(root); },
                   [&] { return kill(root, 0) == 0; }, o, stop);
}

Status Hang(const std::vector<pid_t>& pids, int64_t duration_ms,
            const std::atomic<bool>& stop) {
  for (pid_t p : pids) {
    Status st = Signal(p, SIGSTOP);
    if (!st.ok()) {
      SignalAll(pids, SIGCONT);
      return st;
    }
  }
  if (duration_ms < 0) return absl::OkStatus();
  Wait(duration_ms, stop);
  SignalAll(pids, SIGCONT);
  return absl::OkStatus();
}

}  // namespace strata::fault
