// `strata`: the user-facing command. Subcommands are registered from
// cli/*_command.cc (see commands.h for the exit-code contract).
#include <cstdio>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/torchrun_args.h"
#include "common/logging.h"

namespace strata::cli {
namespace {
std::vector<std::string> g_command;
}
const std::vector<std::string>& CommandAfterDashDash() { return g_command; }
}  // namespace strata::cli

int main(int argc, char** argv) {
  // `strata run|submit` also take torchrun's form (cli/torchrun_args.h):
  // rewritten into strata's own before anything else reads them.
  std::vector<std::string> words(argv, argv + argc);
  for (int i = 1; i < argc; ++i) {
    if (words[i] == "--") break;
    if (words[i] != "run" && words[i] != "submit") continue;
    auto rest = strata::cli::TranslateTorchrunArgs(
        std::vector<std::string>(words.begin() + i + 1, words.end()));
    if (!rest.ok()) {
      std::fprintf(stderr, "strata %s: %s\n", words[i].c_str(),
                   std::string(rest.status().message()).c_str());
      return strata::cli::kExitBadInput;
    }
    words.resize(i + 1);
    words.insert(words.end(), rest->begin(), rest->end());
    break;
  }
  std::vector<char*> word_ptrs;
  for (std::string& w : words) word_ptrs.push_back(w.data());
  argc = static_cast<int>(word_ptrs.size());
  argv = word_ptrs.data();
  // `strata run ... -- COMMAND ARGS`: everything after the first "--" is the
  // rank command, never parsed as strata's own arguments.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      strata::cli::g_command.assign(argv + i + 1, argv + argc);
      argc = i;
      break;
    }
  }
  CLI::App app{
      "strata: plans, launches and checkpoints large-model training jobs"};
  app.require_subcommand(1);
  std::string log_level = "warn";
  app.add_option("--log-level", log_level,
                 "trace|debug|info|warn|error|off (logs go to stderr)")
      ->capture_default_str();
  app.parse_complete_callback([&] {
    if (!strata::SetLogLevel(log_level)) {
      throw CLI::ValidationError("--log-level", "unknown level " + log_level);
    }
  });

  strata::cli::AddPlanCommand(&app);
  strata::cli::AddCkptCommand(&app);
  strata::cli::AddJobCommands(&app);
  strata::cli::AddRunCommand(&app);
  strata::cli::AddProbeCommand(&app);
  strata::cli::AddKeygenCommand(&app);
  strata::cli::AddTraceCommand(&app);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "strata: %s\n", e.what());
    std::fprintf(stderr, "Run with --help for usage.\n");
    return strata::cli::kExitBadInput;
  }
  return 0;
}
