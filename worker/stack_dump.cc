#include "worker/stack_dump.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/subprocess.h"

namespace strata::worker {
namespace {

// The first of `names` found in PATH, or "".
std::string FindTool(const std::vector<std::string>& names) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path != nullptr ? path : "/usr/bin:/bin");
  std::vector<std::string> list;
  for (std::string d; std::getline(dirs, d, ':');) list.push_back(d);
  for (const auto& n : names) {
    for (const auto& d : list) {
      const std::string p = absl::StrCat(d, "/", n);
      if (access(p.c_str(), X_OK) == 0) return p;
    }
  }
  return "";
}

// py-spy for the Python process `pid`, or "" when it is not one or none is
// found: the rank's PATH, the directory of its argv[0], the worker's PATH.
std::string FindPySpy(int pid) {
  const std::string proc = absl::StrCat("/proc/", pid);
  char exe[4096];
  const ssize_t n = readlink((proc + "/exe").c_str(), exe, sizeof exe - 1);
  if (n <= 0) return "";
  const std::string path(exe, n);
  if (path.substr(path.rfind('/') + 1).rfind("python", 0) != 0) return "";
  std::vector<std::string> dirs;
  std::ifstream environ(proc + "/environ");
  for (std::string kv; std::getline(environ, kv, '\0');) {
    if (kv.rfind("PATH=", 0) != 0) continue;
    std::stringstream list(kv.substr(5));
    for (std::string d; std::getline(list, d, ':');) dirs.push_back(d);
  }
  std::ifstream cmdline(proc + "/cmdline");
  std::string argv0;
  std::getline(cmdline, argv0, '\0');
  if (argv0.find('/') != std::string::npos) {
    dirs.push_back(argv0.substr(0, argv0.rfind('/')));
  }
  for (const auto& d : dirs) {
    const std::string p = absl::StrCat(d, "/py-spy");
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return FindTool({"py-spy"});
}

std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) out.append(buf, n);
  return out;
}

// Drops "(...)" argument lists, nested ones included.
std::string DropArgs(const std::string& s) {
  std::string out;
  int depth = 0;
  for (char c : s) {
    if (c == '(') ++depth;
    if (depth == 0) out += c;
    if (c == ')' && depth > 0) --depth;
  }
  return out;
}

}  // namespace

std::string CompactBacktrace(const std::string& raw, size_t max_chars) {
  std::stringstream in(raw);
  std::string out;
  bool in_frame = false;
  for (std::string line; std::getline(in, line);) {
    // eu-stack -s puts a frame's source on the next, indented line.
    if (in_frame && !line.empty() && (line[0] == ' ' || line[0] == '\t')) {
      absl::StrAppend(&out, " at ", absl::StripAsciiWhitespace(line));
      in_frame = false;
      continue;
    }
    in_frame = !line.empty() && line[0] == '#';
    if (!in_frame) continue;
    std::string f = DropArgs(line);
    // "#3  0x00007f12 in foo at x.cc:3" / eu-stack "#3  0x00007f12 foo"
    const size_t sp = f.find_first_of(" \t");
    std::string num = f.substr(0, sp), rest = f.substr(sp == std::string::npos
                                                           ? f.size()
                                                           : sp);
    rest = std::string(absl::StripAsciiWhitespace(rest));
    if (absl::StartsWith(rest, "0x")) {
      const size_t end = rest.find_first_of(" \t");
      rest = end == std::string::npos
                 ? rest
                 : std::string(absl::StripAsciiWhitespace(rest.substr(end)));
      if (absl::StartsWith(rest, "in ")) rest = rest.substr(3);
    }
    std::string frame = absl::StrCat(num, " ", rest);
    while (frame.find("  ") != std::string::npos)
      frame.replace(frame.find("  "), 2, " ");
    if (!out.empty()) out += " | ";
    out += frame;
    if (out.size() >= max_chars) {
      out.resize(max_chars);
      out += "...";
      break;
    }
  }
  return out;
}

StackDumps::~StackDumps() {
  for (auto& [id, r] : running_) Reap(r);
}

void StackDumps::Reap(Running& r) {
  for (Child* c : {&r.native, &r.python}) {
    if (c->pid <= 0) continue;
    if (!c->done) {
      kill(c->pid, SIGKILL);
      waitpid(c->pid, nullptr, 0);
    }
    close(c->out_fd);
  }
}

std::string CompactPyStack(const std::string& raw, size_t max_chars) {
  // Thread 7 (idle): "MainThread"
  //     wait (threading.py:320)
  //     main (train.py:40)
  std::stringstream in(raw);
  std::string out;
  bool in_thread = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("Thread ", 0) == 0) {
      if (in_thread) break;  // the first thread only
      in_thread = true;
      continue;
    }
    if (!in_thread || line.empty() || line[0] != ' ') continue;
    if (!out.empty()) out += " | ";
    absl::StrAppend(&out, absl::StripAsciiWhitespace(line));
    if (out.size() >= max_chars) {
      out.resize(max_chars);
      out += "...";
      break;
    }
  }
  return out;
}

namespace {

// Forks argv with its output in an anonymous file.
StatusOr<std::pair<pid_t, int>> StartDumper(std::vector<std::string> argv) {
  const int fd = memfd_create("strata-stack", MFD_CLOEXEC);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("memfd_create: ", strerror(errno)));
  }
  SubprocessOptions o;
  o.argv = std::move(argv);
  o.out.fd = fd;
  o.err.path = "/dev/null";
  o.in.path = "/dev/null";
  auto child = StartSubprocess(o);
  if (!child.ok()) {
    close(fd);
    return child.status();
  }
  return std::pair<pid_t, int>{*child, fd};
}

}  // namespace

std::optional<std::string> StackDumps::Start(int id, int pid, int64_t now_ms) {
  static const std::string eu = FindTool({"eu-stack"});
  static const std::string gdb = FindTool({"gdb"});
  const std::string p = std::to_string(pid);
  std::vector<std::string> argv;
  // Only the main thread (the one doing the steps; eu-stack -1, and gdb's
  // thread selected after attaching). eu-stack first: ~0.1 s on
  // strata-train, where gdb reads all debug info first (2-3 s).
  if (!eu.empty()) {
    argv = {eu, "-1", "-s", "-i", "-n", "24", "-p", p};
  } else if (!gdb.empty()) {
    argv = {gdb, "-p", p, "-batch", "-nx", "-q", "-ex", "bt 24"};
  } else {
    return std::string();
  }
  // py-spy before the debugger attaches: a ptrace-stopped process still
  // has readable memory, but the two would race for the attach otherwise.
  Running r;
  r.deadline_ms = now_ms + budget_ms_;
  if (const std::string spy = FindPySpy(pid); !spy.empty()) {
    auto py = StartDumper({spy, "dump", "--nonblocking", "--pid", p});
    if (py.ok()) r.python = {py->first, py->second};
  }
  auto native = StartDumper(std::move(argv));
  if (!native.ok()) {
    if (r.python.pid > 0) {
      kill(r.python.pid, SIGKILL);
      waitpid(r.python.pid, nullptr, 0);
      close(r.python.out_fd);
    }
    return absl::StrCat("stack: ", native.status().message());
  }
  r.native = {native->first, native->second};
  running_[id] = r;
  return std::nullopt;
}

std::map<int, std::string> StackDumps::Poll(int64_t now_ms) {
  std::map<int, std::string> done;
  for (auto it = running_.begin(); it != running_.end();) {
    Running& r = it->second;
    for (Child* c : {&r.native, &r.python}) {
      if (c->pid > 0 && !c->done) {
        int status = 0;
        c->done = waitpid(c->pid, &status, WNOHANG) == c->pid;
      }
    }
    const bool python_done = r.python.pid <= 0 || r.python.done;
    const bool late = now_ms >= r.deadline_ms;
    if (!(r.native.done && python_done) && !late) {
      ++it;
      continue;
    }
    std::string text;
    if (!r.native.done) {
      text = absl::StrCat("stack: debugger gave no backtrace within ",
                          budget_ms_, " ms");
    } else {
      text = CompactBacktrace(ReadAll(r.native.out_fd));
      text = text.empty() ? "stack: the debugger printed no frames"
                          : "stack: " + text;
    }
    if (r.python.pid > 0) {
      std::string py = r.python.done ? CompactPyStack(ReadAll(r.python.out_fd))
                                     : std::string();
      absl::StrAppend(&text, " || python: ",
                      !r.python.done ? absl::StrCat("py-spy gave no stack within ",
                                                    budget_ms_, " ms")
                      : py.empty()   ? "py-spy printed no frames"
                                     : py);
    }
    Reap(r);
    done[it->first] = std::move(text);
    it = running_.erase(it);
  }
  return done;
}

}  // namespace strata::worker
