#include "worker/flight_reader.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <algorithm>
#include <iterator>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "comm/flight_recorder.h"

namespace strata::worker {
namespace {

// The uid the rank process `pid` runs as (the owner of /proc/<pid>); the
// worker's own when the process is gone (ranks run as the worker's user
// unless it was started with --rank-user).
uid_t RankUid(int pid) {
  struct stat st;
  const std::string proc = absl::StrCat("/proc/", pid);
  return stat(proc.c_str(), &st) == 0 ? st.st_uid : geteuid();
}

// The recorder of (job, rank, pid), checked: a regular file owned by the
// rank's uid whose header names them.
StatusOr<comm::FrDump> ReadChecked(const std::string& job_id, int rank,
                                   int pid) {
  const comm::FrExpect expect{job_id, rank, pid, RankUid(pid)};
  return comm::ReadFlightRecorder(comm::FlightRecorderPath(job_id, rank, pid),
                                  &expect);
}

std::string ReadSmall(const std::string& path) {
  std::ifstream in(path);
  std::string s((std::istreambuf_iterator<char>(in)), {});
  while (!s.empty() && (s.back() == '\n' || s.back() == '\0')) s.pop_back();
  return s;
}

// "state T (stopped); 5 threads: 3 in futex_wait_queue, 2 in do_signal_stop"
std::string Where(int pid) {
  const std::string dir = absl::StrCat("/proc/", pid);
  std::string state;
  std::ifstream status(dir + "/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("State:", 0) == 0) state = line.substr(6);
  }
  while (!state.empty() && (state[0] == ' ' || state[0] == '\t'))
    state.erase(0, 1);
  std::map<std::string, int> wchan;
  int threads = 0;
  if (DIR* d = opendir((dir + "/task").c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      ++threads;
      std::string w = ReadSmall(dir + "/task/" + e->d_name + "/wchan");
      ++wchan[w.empty() || w == "0" ? "running" : w];
    }
    closedir(d);
  }
  if (state.empty()) return "";
  std::string out = absl::StrCat("state ", state, "; ", threads, " thread(s):");
  for (const auto& [w, n] : wchan) absl::StrAppend(&out, " ", n, " in ", w);
  return out;
}

}  // namespace

control::RankFlight ReadRankFlight(const std::string& job_id, int attempt,
                                   int rank, int pid) {
  control::RankFlight f;
  f.set_job_id(job_id);
  f.set_attempt(attempt);
  f.set_rank(rank);
  f.set_stack(Where(pid));
  f.set_stopped(f.stack().starts_with("state T") ||
                f.stack().starts_with("state t"));
  auto dump = ReadChecked(job_id, rank, pid);
  if (!dump.ok()) {
    f.set_error(std::string(dump.status().message()));
    return f;
  }
  std::map<std::string, control::GroupProgress> groups;
  for (const comm::FrEntry& e : dump->entries) {
    control::GroupProgress& g = groups[e.group];
    if (g.group().empty()) {
      g.set_group(e.group);
      g.set_entered_seq(-1);
      g.set_completed_seq(-1);
    }
    const int64_t seq = static_cast<int64_t>(e.seq);
    if (seq > g.entered_seq()) {
      g.set_entered_seq(seq);
      g.set_op(e.op);
    }
    if (e.state == comm::FrState::kFinished && seq > g.completed_seq()) {
      g.set_completed_seq(seq);
    }
  }
  for (auto& [name, g] : groups) *f.add_groups() = std::move(g);
  return f;
}

control::RankTrace ReadRankTrace(const std::string& job_id, int attempt,
                                 int rank, int pid) {
  control::RankTrace t;
  t.set_job_id(job_id);
  t.set_attempt(attempt);
  t.set_rank(rank);
  auto dump = ReadChecked(job_id, rank, pid);
  if (!dump.ok()) {
    t.set_error(std::string(dump.status().message()));
    return t;
  }
  for (const comm::FrEntry& e : dump->entries) {
    control::CollectiveRecord* r = t.add_ops();
    r->set_group(e.group);
    r->set_seq(e.seq);
    r->set_op(e.op);
    r->set_bytes(e.bytes);
    r->set_entered_us(e.entered_ns / 1000);
    r->set_started_us(e.started_ns / 1000);
    if (e.state == comm::FrState::kFinished)
      r->set_finished_us(e.finished_ns / 1000);
  }
  return t;
}

StatusOr<RecordedShare> ReadRecordedShare(const std::string& job_id, int rank,
                                          int pid, int64_t now_ns,
                                          int64_t window_ns) {
  ASSIGN_OR_RETURN(comm::FrDump dump, ReadChecked(job_id, rank, pid));
  const int64_t from = now_ns - window_ns;
  RecordedShare out;
  std::vector<std::pair<int64_t, int64_t>> spans;
  for (const comm::FrEntry& e : dump.entries) {
    if (e.state != comm::FrState::kFinished || e.finished_ns <= from ||
        e.finished_ns > now_ns || e.entered_ns > e.finished_ns) {
      continue;
    }
    ++out.ops;
    spans.emplace_back(std::max(e.entered_ns, from), e.finished_ns);
  }
  // The union of the spans: collectives of different groups may overlap.
  std::sort(spans.begin(), spans.end());
  int64_t inside = 0, end = from;
  for (const auto& [b, e] : spans) {
    const int64_t start = std::max(b, end);
    if (e > start) inside += e - start;
    end = std::max(end, e);
  }
  out.share = window_ns > 0 ? static_cast<double>(inside) / window_ns : 0;
  return out;
}

}  // namespace strata::worker
