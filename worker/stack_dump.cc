#include "worker/stack_dump.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
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

// Whether `pid` runs a python* executable (/proc/PID/exe).
bool IsPython(int pid) {
  char exe[4096];
  const ssize_t n = readlink(absl::StrCat("/proc/", pid, "/exe").c_str(), exe,
                             sizeof exe - 1);
  if (n <= 0) return false;
  const std::string path(exe, n);
  return path.substr(path.rfind('/') + 1).rfind("python", 0) == 0;
}

// The value of `name` in the environment of `pid` (/proc/PID/environ), or "".
std::string EnvOf(int pid, const std::string& name) {
  std::ifstream environ(absl::StrCat("/proc/", pid, "/environ"));
  const std::string prefix = name + "=";
  for (std::string kv; std::getline(environ, kv, '\0');) {
    if (kv.rfind(prefix, 0) == 0) return kv.substr(prefix.size());
  }
  return "";
}

// py-spy for the Python process `pid`, or "" when it is not one or none is
// found: the rank's PATH, the directory of its argv[0], the worker's PATH.
std::string FindPySpy(int pid) {
  if (!IsPython(pid)) return "";
  std::vector<std::string> dirs;
  std::stringstream list(EnvOf(pid, "PATH"));
  for (std::string d; std::getline(list, d, ':');) dirs.push_back(d);
  std::ifstream cmdline(absl::StrCat("/proc/", pid, "/cmdline"));
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

// "pystack-<pid>" next to the STRATA_PLAN file of the Python process `pid`
// when it is a regular file (not a symlink): the rank registered
// faulthandler (python/strata/_pystack.py). "" otherwise.
std::string FaultHandlerFile(int pid) {
  if (!IsPython(pid)) return "";
  const std::string plan = EnvOf(pid, "STRATA_PLAN");
  const size_t slash = plan.rfind('/');
  if (slash == std::string::npos) return "";
  const std::string path =
      absl::StrCat(plan.substr(0, slash), "/pystack-", pid);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return "";
  return path;
}

// Whether `pid` is stopped or traced (state T or t in /proc/PID/stat).
bool Stopped(int pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string s;
  std::getline(in, s);
  const size_t p = s.rfind(')');
  return p != std::string::npos && p + 2 < s.size() &&
         (s[p + 2] == 'T' || s[p + 2] == 't');
}

// The first `limit` bytes of the regular file `path` (never through a
// symlink), or "".
std::string ReadFileHead(const std::string& path, size_t limit = 256 << 10) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return "";
  std::string out;
  char buf[4096];
  for (ssize_t n; out.size() < limit && (n = read(fd, buf, sizeof buf)) > 0;) {
    out.append(buf, n);
  }
  close(fd);
  return out;
}

// Size of `path` (its link, when a symlink), 0 when it cannot be read.
size_t FileSize(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0 ? static_cast<size_t>(st.st_size) : 0;
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

// Appends " | frame" to the one-line stack `out`; false once it reached
// `max_chars` (cut there and marked "...").
bool AppendFrame(const std::string& frame, size_t max_chars,
                 std::string* out) {
  if (!out->empty()) *out += " | ";
  *out += frame;
  if (out->size() < max_chars) return true;
  out->resize(max_chars);
  *out += "...";
  return false;
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
    if (!AppendFrame(frame, max_chars, &out)) break;
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

std::string CompactFaultHandlerStack(const std::string& raw,
                                     size_t max_chars) {
  // Thread 0x00007f41199566c0 (most recent call first):
  //   File "/x/train.py", line 40 in train_step
  //
  // Current thread 0x00007f4127dbeb80 (most recent call first):
  //   File "/x/train.py", line 77 in main
  std::vector<std::pair<bool, std::vector<std::string>>> threads;
  std::stringstream in(raw);
  for (std::string line; std::getline(in, line);) {
    const bool current = line.rfind("Current thread ", 0) == 0;
    if (current || line.rfind("Thread ", 0) == 0) {
      threads.push_back({current, {}});
      continue;
    }
    const std::string l(absl::StripAsciiWhitespace(line));
    const size_t q = l.find("\", line ");
    const size_t in_at = l.rfind(" in ");
    if (threads.empty() || l.rfind("File \"", 0) != 0 ||
        q == std::string::npos || in_at == std::string::npos || in_at < q) {
      continue;
    }
    std::string file = l.substr(6, q - 6);
    file = file.substr(file.rfind('/') + 1);  // npos + 1 == 0: no directory
    const std::string number = l.substr(q + 8, in_at - q - 8);
    threads.back().second.push_back(
        absl::StrCat(l.substr(in_at + 4), " (", file, ":", number, ")"));
  }
  if (threads.empty()) return "";
  const auto* pick = &threads.front();
  for (const auto& t : threads) {
    if (t.first) pick = &t;
  }
  std::string out;
  for (const std::string& frame : pick->second) {
    if (!AppendFrame(frame, max_chars, &out)) break;
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
  Running r;
  // Only the main thread (the one doing the steps; eu-stack -1, and gdb's
  // thread selected after attaching). eu-stack first: ~0.1 s on
  // strata-train, where gdb reads all debug info first (2-3 s).
  if (!eu.empty()) {
    r.native_argv = {eu, "-1", "-s", "-i", "-n", "24", "-p", p};
  } else if (!gdb.empty()) {
    r.native_argv = {gdb, "-p", p, "-batch", "-nx", "-q", "-ex", "bt 24"};
  } else {
    return std::string();
  }
  if (const std::string spy = FindPySpy(pid); !spy.empty()) {
    r.pyspy_argv = {spy, "dump", "--nonblocking", "--pid", p};
  }
  r.deadline_ms = now_ms + budget_ms_;
  // faulthandler first (see the header): the file emptied, then the signal.
  if (const std::string fh = FaultHandlerFile(pid);
      !fh.empty() && !Stopped(pid)) {
    const int fd = open(fh.c_str(), O_WRONLY | O_TRUNC | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      close(fd);
      if (kill(pid, SIGRTMIN + kPyStackSignalOffset) == 0) {
        r.fh_path = fh;
        r.fh_sent_ms = now_ms;
        r.pending = true;
        r.deadline_ms += kFaultHandlerGraceMs;
        running_[id] = std::move(r);
        return std::nullopt;
      }
    }
  }
  std::string error;
  if (!StartDumpers(r, &error)) return absl::StrCat("stack: ", error);
  running_[id] = std::move(r);
  return std::nullopt;
}

bool StackDumps::StartDumpers(Running& r, std::string* error) {
  r.pending = false;
  // py-spy before the debugger attaches: a ptrace-stopped process still
  // has readable memory, but the two would race for the attach otherwise.
  if (!r.pyspy_argv.empty()) {
    auto py = StartDumper(r.pyspy_argv);
    if (py.ok()) r.python = {py->first, py->second};
  }
  auto native = StartDumper(r.native_argv);
  if (!native.ok()) {
    if (r.python.pid > 0) {
      kill(r.python.pid, SIGKILL);
      waitpid(r.python.pid, nullptr, 0);
      close(r.python.out_fd);
      r.python = {};
    }
    *error = std::string(native.status().message());
    return false;
  }
  r.native = {native->first, native->second};
  return true;
}

std::map<int, std::string> StackDumps::Poll(int64_t now_ms) {
  std::map<int, std::string> done;
  for (auto it = running_.begin(); it != running_.end();) {
    Running& r = it->second;
    if (r.pending) {
      // The dump is taken as written once the file was seen non-empty at
      // an earlier poll (faulthandler writes it in one go), or at the grace.
      const bool written = r.fh_seen_ms >= 0 && now_ms > r.fh_seen_ms;
      if (r.fh_seen_ms < 0 && FileSize(r.fh_path) > 0) r.fh_seen_ms = now_ms;
      if (!written && now_ms - r.fh_sent_ms < kFaultHandlerGraceMs) {
        ++it;
        continue;
      }
      if (std::string error; !StartDumpers(r, &error)) {
        done[it->first] = absl::StrCat("stack: ", error);
        it = running_.erase(it);
        continue;
      }
    }
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
    // py-spy's stack, else faulthandler's, else why there is none.
    std::string py = r.python.pid > 0 && r.python.done
                         ? CompactPyStack(ReadAll(r.python.out_fd))
                         : std::string();
    if (py.empty() && !r.fh_path.empty()) {
      py = CompactFaultHandlerStack(ReadFileHead(r.fh_path));
    }
    if (!py.empty()) {
      absl::StrAppend(&text, " || python: ", py);
    } else if (r.python.pid > 0) {
      absl::StrAppend(&text, " || python: ",
                      !r.python.done ? absl::StrCat("py-spy gave no stack within ",
                                                    budget_ms_, " ms")
                                     : "py-spy printed no frames");
    } else if (!r.fh_path.empty()) {
      absl::StrAppend(&text, " || python: faulthandler wrote no stack within ",
                      kFaultHandlerGraceMs, " ms");
    }
    Reap(r);
    done[it->first] = std::move(text);
    it = running_.erase(it);
  }
  return done;
}

}  // namespace strata::worker
