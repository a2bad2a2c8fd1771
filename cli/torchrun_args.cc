#include "cli/torchrun_args.h"

#include <algorithm>
#include <array>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace strata::cli {
namespace {

// strata's own options that take a value (job_args.cc AddJobOptions,
// run_command.cc): their value is never the script.
constexpr std::array<std::string_view, 21> kStrataValued = {
    "--name",         "--nodes",      "--ranks-per-node", "--min-nodes",
    "--max-restarts", "--tp",         "--pp",             "--cp",
    "--model",        "--ckpt",       "--env",            "--fault",
    "--heartbeat-ms", "--state-dir",  "--dashboard",      "--kill-worker-at-step",
    "--inject",       "--coordinator", "--sbatch-arg", "--curve-dir",
    "--spares"};

// torchrun (torch/distributed/run.py) flags strata does not take, with
// what to do instead. Both spellings (dash, underscore) are matched.
struct Unsupported {
  std::string_view flag;
  std::string_view why;
};
constexpr std::array<Unsupported, 17> kUnsupported = {{
    {"--rdzv-backend", "strata's coordinator does the rendezvous"},
    {"--rdzv-endpoint", "strata's coordinator does the rendezvous"},
    {"--rdzv-id", "strata names the job (--name)"},
    {"--rdzv-conf", "strata's coordinator does the rendezvous"},
    {"--node-rank", "strata's coordinator places the nodes"},
    {"--master-addr", "strata sets MASTER_ADDR for every rank"},
    {"--master-port", "strata sets MASTER_PORT for every rank"},
    {"--local-addr", "strata's workers register their own address"},
    {"--role", "a strata job has one role"},
    {"--monitor-interval", "strata's workers supervise the ranks"},
    {"--start-method", "strata's workers start each rank as a process"},
    {"--log-dir", "use `strata logs` (or --state-dir)"},
    {"--redirects", "strata collects every rank's output (`strata logs`)"},
    {"--tee", "strata collects every rank's output (`strata logs`)"},
    {"--local-ranks-filter", "strata collects every rank's output"},
    {"--run-path", "give the script or -m MODULE"},
    {"--logs-specs", "use `strata logs`"},
}};

std::string Dashed(const std::string& flag) {
  std::string s(flag);
  // "--nproc_per_node" -> "--nproc-per-node"; the leading "--" is kept.
  std::replace(s.begin() + 2, s.end(), '_', '-');
  return s;
}

bool IsJobFile(const std::string& word) {
  return absl::EndsWith(word, ".yaml") || absl::EndsWith(word, ".yml") ||
         absl::EndsWith(word, ".json");
}

Status Bad(const std::string& flag, const std::string& message) {
  return absl::InvalidArgumentError(
      absl::StrCat("torchrun flag ", flag, ": ", message));
}

}  // namespace

StatusOr<std::vector<std::string>> TranslateTorchrunArgs(
    const std::vector<std::string>& args) {
  std::vector<std::string> out, command;
  bool python = true, module = false, torchrun = false;
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& word = args[i];
    if (word == "--") break;  // strata's own form: the rest is the command
    if (word == "-m" || word == "--module") {
      module = torchrun = true;
      continue;
    }
    if (word == "-r" || word == "-t") {
      return absl::InvalidArgumentError(absl::StrCat(
          "torchrun flag ", word, " (", word == "-r" ? "--redirects" : "--tee",
          ") is not supported by strata (strata collects every rank's "
          "output: `strata logs`)"));
    }
    if (word == "-f" || word == "-h") {  // strata's own short flags
      out.push_back(word);
      continue;
    }
    if (!word.starts_with("--")) {
      if (!module && IsJobFile(word)) {
        out.push_back(word);
        continue;
      }
      break;  // the script (or module): the rest is its arguments
    }
    // --flag or --flag=value, either spelling.
    const size_t eq = word.find('=');
    const std::string flag = Dashed(word.substr(0, eq));
    const bool inline_value = eq != std::string::npos;
    auto value = [&]() -> StatusOr<std::string> {
      if (inline_value) return word.substr(eq + 1);
      if (i + 1 >= args.size()) return Bad(flag, "needs a value");
      return args[++i];
    };
    if (flag == "--standalone") {
      torchrun = true;
      continue;
    }
    if (flag == "--no-python") {
      python = false;
      torchrun = true;
      continue;
    }
    if (flag == "--nnodes") {
      ASSIGN_OR_RETURN(std::string v, value());
      const size_t colon = v.find(':');
      int lo = 0, hi = 0;
      const bool ok =
          colon == std::string::npos
              ? absl::SimpleAtoi(v, &hi) && (lo = hi) > 0
              : absl::SimpleAtoi(v.substr(0, colon), &lo) &&
                    absl::SimpleAtoi(v.substr(colon + 1), &hi) && lo > 0 &&
                    lo <= hi;
      if (!ok) return Bad(flag, absl::StrCat("'", v, "' is not N or MIN:MAX"));
      out.insert(out.end(), {"--nodes", std::to_string(hi)});
      if (lo != hi) out.insert(out.end(), {"--min-nodes", std::to_string(lo)});
      torchrun = true;
      continue;
    }
    if (flag == "--nproc-per-node") {
      ASSIGN_OR_RETURN(std::string v, value());
      torchrun = true;
      if (v == "auto" || v == "gpu") continue;  // strata's default
      int n = 0;
      if (!absl::SimpleAtoi(v, &n) || n < 1) {
        return Bad(flag, absl::StrCat("'", v,
                                      "' is not a count of ranks (or auto, "
                                      "gpu); strata runs no \"cpu\" mode"));
      }
      out.insert(out.end(), {"--ranks-per-node", v});
      continue;
    }
    if (flag == "--max-restarts") {
      ASSIGN_OR_RETURN(std::string v, value());
      out.insert(out.end(), {"--max-restarts", v});
      continue;
    }
    for (const Unsupported& u : kUnsupported) {
      if (flag == u.flag) {
        return absl::InvalidArgumentError(absl::StrCat(
            "torchrun flag ", word.substr(0, eq),
            " is not supported by strata (", std::string(u.why), ")"));
      }
    }
    out.push_back(word);
    const bool valued =
        std::find(kStrataValued.begin(), kStrataValued.end(),
                  word.substr(0, eq)) != kStrataValued.end();
    if (valued && !inline_value && i + 1 < args.size()) out.push_back(args[++i]);
  }
  if (i < args.size() && args[i] == "--") {
    if (module) return Bad("-m", "give the module instead of `-- COMMAND`");
    if (torchrun && !python) {
      return Bad("--no-python", "give the program instead of `-- COMMAND`");
    }
    out.insert(out.end(), args.begin() + i, args.end());
    return out;
  }
  if (i == args.size()) {
    if (module) return Bad("-m", "needs a module name");
    return torchrun ? out : args;
  }
  // The torchrun form: args[i] is the script or module.
  out.push_back("--");
  if (python) out.push_back("python3");
  if (module) {
    if (!python) return Bad("-m", "cannot be combined with --no-python");
    out.push_back("-m");
  }
  out.insert(out.end(), args.begin() + i, args.end());
  return out;
}

}  // namespace strata::cli
