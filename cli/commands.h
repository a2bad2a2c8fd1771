// The `strata` command is one CLI11 app; each subcommand lives in its own
// file and registers itself here. A command's callback reports failure by
// throwing CLI::RuntimeError(exit_code) after printing one clear message to
// stderr: exit code 2 = bad input (usage, files, impossible requests),
// 1 = the operation failed.
#pragma once

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace strata::cli {

// Arguments after the first "--" on the command line (cli/main.cc).
const std::vector<std::string>& CommandAfterDashDash();

inline constexpr int kExitBadInput = 2;
inline constexpr int kExitFailed = 1;

void AddPlanCommand(CLI::App* app);
void AddCkptCommand(CLI::App* app);
void AddJobCommands(CLI::App* app);  // submit status logs cancel workers events
void AddRunCommand(CLI::App* app);
void AddProbeCommand(CLI::App* app);
void AddKeygenCommand(CLI::App* app);
void AddTraceCommand(CLI::App* app);  // docs/observe.md "Traces"  // CURVE keys (docs/control-plane.md)

}  // namespace strata::cli
