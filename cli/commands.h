// The `strata` command is one CLI11 app; each subcommand lives in its own
// file and registers itself here. A command's callback reports failure by
// throwing CLI::RuntimeError(exit_code) after printing one clear message to
// stderr: exit code 2 = bad input (usage, files, impossible requests),
// 1 = the operation failed.
#pragma once

#include "CLI/CLI.hpp"

namespace strata::cli {

inline constexpr int kExitBadInput = 2;
inline constexpr int kExitFailed = 1;

void AddPlanCommand(CLI::App* app);
void AddCkptCommand(CLI::App* app);

}  // namespace strata::cli
