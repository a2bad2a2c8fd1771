#include "worker/stack_dump.h"

#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
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
  for (auto& [id, r] : running_) {
    kill(r.child, SIGKILL);
    waitpid(r.child, nullptr, 0);
    close(r.out_fd);
  }
}

std::optional<std::string> StackDumps::Start(int id, int pid, int64_t now_ms) {
  static const std::string eu = FindTool({"eu-stack"});
  static const std::string gdb = FindTool({"gdb"});
  SubprocessOptions o;
  const std::string p = std::to_string(pid);
  // Only the main thread (the one doing the steps; eu-stack -1, and gdb's
  // thread selected after attaching). eu-stack first: ~0.1 s on
  // strata-train, where gdb reads all debug info first (2-3 s).
  if (!eu.empty()) {
    o.argv = {eu, "-1", "-s", "-i", "-n", "24", "-p", p};
  } else if (!gdb.empty()) {
    o.argv = {gdb, "-p", p, "-batch", "-nx", "-q", "-ex", "bt 24"};
  } else {
    return std::string();
  }
  const int fd = memfd_create("strata-stack", MFD_CLOEXEC);
  if (fd < 0) return absl::StrCat("stack: memfd_create: ", strerror(errno));
  o.out.fd = fd;
  o.err.path = "/dev/null";
  o.in.path = "/dev/null";
  auto child = StartSubprocess(o);
  if (!child.ok()) {
    close(fd);
    return absl::StrCat("stack: ", child.status().message());
  }
  running_[id] = {*child, fd, now_ms + budget_ms_};
  return std::nullopt;
}

std::map<int, std::string> StackDumps::Poll(int64_t now_ms) {
  std::map<int, std::string> done;
  for (auto it = running_.begin(); it != running_.end();) {
    Running& r = it->second;
    int status = 0;
    bool finished = waitpid(r.child, &status, WNOHANG) == r.child;
    std::string text;
    if (!finished && now_ms >= r.deadline_ms) {
      kill(r.child, SIGKILL);
      waitpid(r.child, nullptr, 0);
      finished = true;
      text = absl::StrCat("stack: debugger gave no backtrace within ",
                          budget_ms_, " ms");
    } else if (finished) {
      text = CompactBacktrace(ReadAll(r.out_fd));
      text = text.empty() ? "stack: the debugger printed no frames"
                          : "stack: " + text;
    }
    if (!finished) {
      ++it;
      continue;
    }
    close(r.out_fd);
    done[it->first] = std::move(text);
    it = running_.erase(it);
  }
  return done;
}

}  // namespace strata::worker
