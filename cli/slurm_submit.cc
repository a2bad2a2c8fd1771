#include "cli/slurm_submit.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <regex>

#include "absl/strings/str_cat.h"
#include "common/embedded.h"

namespace strata {
extern const EmbeddedFile kSlurmTemplates[];
extern const int kSlurmTemplates_count;
}  // namespace strata

namespace strata::cli {
namespace {

namespace fs = std::filesystem;

constexpr char kMarker[] = "# @STRATA_PARAMETERS@";

std::string SingleQuoted(const std::string& v) {
  std::string out = "'";
  for (char c : v) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The build tree (<build>/cli/strata) or install prefix (<prefix>/bin/strata)
// the running binary belongs to; the script's find_bin searches both shapes.
std::string DefaultBinDir() {
  char self[PATH_MAX] = {0};
  ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n <= 0) return "";
  fs::path dir = fs::path(self).parent_path();
  if (fs::exists(dir.parent_path() / "coordinator" / "strata-coordinator"))
    return dir.parent_path().string();  // build tree
  return dir.string();
}

// Runs argv, returning its exit code (128 + signal if killed) and stdout.
StatusOr<std::pair<int, std::string>> RunCapturingStdout(
    const std::vector<std::string>& argv) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return ErrnoToStatus(errno, "pipe2");
  const pid_t pid = fork();
  if (pid < 0) {
    const int err = errno;
    close(out[0]);
    close(out[1]);
    return ErrnoToStatus(err, "fork");
  }
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(errno == ENOENT ? 127 : 126);
  }
  close(out[1]);
  std::string text;
  char buf[4096];
  for (;;) {
    ssize_t n = read(out[0], buf, sizeof(buf));
    if (n > 0) {
      text.append(buf, n);
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return ErrnoToStatus(errno, "waitpid");
  }
  const int code =
      WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return std::make_pair(code, text);
}

}  // namespace

StatusOr<std::string> RenderSlurmScript(const SlurmSubmitOptions& opts) {
  if (opts.job_file.empty()) {
    return absl::InvalidArgumentError("--slurm needs a job file (job.yaml)");
  }
  std::error_code ec;
  const fs::path job = fs::absolute(opts.job_file, ec);
  if (ec || !fs::is_regular_file(job) || access(job.c_str(), R_OK) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job file '", opts.job_file, "' is not a readable file"));
  }
  for (auto [name, v] : {std::pair{"--nodes", opts.nodes},
                         {"--ranks-per-node", opts.ranks_per_node},
                         {"port", opts.port}}) {
    if (v < 0 || v > 1000000 || (std::string(name) == "port" && v > 65535)) {
      return absl::InvalidArgumentError(
          absl::StrCat(name, " out of range: ", v));
    }
  }
  if (kSlurmTemplates_count < 1) {
    return absl::InternalError("strata.sbatch is not compiled in");
  }
  std::string script = kSlurmTemplates[0].contents;
  const size_t at = script.find(kMarker);
  if (at == std::string::npos) {
    return absl::InternalError("strata.sbatch has no parameter marker");
  }
  std::string params = "# Filled in by `strata submit --slurm`:\n";
  auto set = [&](const char* k, const std::string& v) {
    absl::StrAppend(&params, "export ", k, "=", SingleQuoted(v), "\n");
  };
  set("STRATA_JOB_YAML", job.string());
  const std::string bin = opts.bin_dir.empty() ? DefaultBinDir() : opts.bin_dir;
  if (!bin.empty()) set("STRATA_BIN_DIR", fs::absolute(bin, ec).string());
  if (opts.ranks_per_node > 0)
    set("STRATA_RANKS_PER_NODE", std::to_string(opts.ranks_per_node));
  if (opts.port > 0) set("STRATA_PORT", std::to_string(opts.port));
  script.insert(at, params);
  return script;
}

StatusOr<SlurmSubmission> SubmitViaSlurm(const SlurmSubmitOptions& opts) {
  ASSIGN_OR_RETURN(std::string text, RenderSlurmScript(opts));
  std::error_code ec;
  const fs::path dir =
      fs::absolute(opts.work_dir.empty() ? ".strata-slurm" : opts.work_dir, ec);
  fs::create_directories(dir, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot create ", dir.string(), ": ", ec.message()));
  }
  SlurmSubmission sub;
  sub.script = (dir / "strata.sbatch").string();
  {
    std::ofstream f(sub.script, std::ios::trunc);
    f << text;
    if (!f.good()) {
      return absl::InvalidArgumentError("cannot write " + sub.script);
    }
  }
  fs::permissions(sub.script, fs::perms::owner_all | fs::perms::group_read,
                  fs::perm_options::replace, ec);

  std::vector<std::string> argv = {opts.sbatch};
  if (opts.wait) argv.push_back("--wait");
  if (opts.nodes > 0) argv.push_back(absl::StrCat("--nodes=", opts.nodes));
  argv.push_back("--job-name=strata");
  argv.push_back(absl::StrCat("--output=", (dir / "strata-%j.out").string()));
  argv.insert(argv.end(), opts.sbatch_args.begin(), opts.sbatch_args.end());
  argv.push_back(sub.script);
  ASSIGN_OR_RETURN(auto result, RunCapturingStdout(argv));
  const auto& [code, out] = result;
  if (code == 127) {
    return absl::FailedPreconditionError(absl::StrCat(
        "'", opts.sbatch,
        "' not found: install Slurm's client (apt-get install slurm-client) "
        "or run where Slurm is available"));
  }
  std::smatch m;
  static const std::regex kSubmitted("Submitted batch job ([0-9]+)");
  if (std::regex_search(out, m, kSubmitted)) sub.slurm_job_id = m[1];
  if (sub.slurm_job_id.empty()) {
    return absl::UnavailableError(absl::StrCat(
        "sbatch did not submit the job (exit code ", code, "): ", out));
  }
  sub.exit_code = opts.wait ? code : 0;
  if (!opts.wait && code != 0) {
    return absl::UnavailableError(
        absl::StrCat("sbatch exited with code ", code, ": ", out));
  }
  return sub;
}

}  // namespace strata::cli
