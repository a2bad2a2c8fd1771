// torchrun's command-line form for `strata run` and `strata submit`:
//
//   strata run --nnodes 2 --nproc-per-node 2 train.py --lr 3e-4
//   strata run --nproc_per_node=4 -m pkg.train --steps 10
//
// does what `torchrun` does with those flags, so replacing the word
// `torchrun` by `strata run` works. The translation is a pure function of
// the arguments: it returns them in strata's own form (strata flags, then
// `-- COMMAND ARGS...`), run before CLI11 parses them.
//
//   torchrun                        strata
//   --nnodes N | MIN:MAX            --nodes N | --min-nodes MIN --nodes MAX
//   --nproc-per-node/_ M            --ranks-per-node M ("auto"/"gpu": default)
//   --max-restarts/_ N              --max-restarts N
//   --standalone                    (always: strata starts its coordinator)
//   --no-python/_                   the script runs directly, not via python3
//   -m/--module MOD ARGS            -- python3 -m MOD ARGS
//   SCRIPT ARGS                     -- python3 SCRIPT ARGS
//
// torchrun's flags for its own rendezvous and agent (--rdzv-*, --node-rank,
// --master-addr, --master-port, --role, --log-dir, --redirects, --tee, ...)
// are refused naming the flag: strata's coordinator does what they
// configure. A first positional ending in .yaml, .yml or .json stays a
// JobSpec file. Everything after the script (or after `--`) is the rank's,
// never read as a flag.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace strata::cli {

// `args` are the words after the subcommand (`run` or `submit`). Returns
// them unchanged when they hold no torchrun form; InvalidArgument naming a
// torchrun flag strata does not support, or a malformed value.
StatusOr<std::vector<std::string>> TranslateTorchrunArgs(
    const std::vector<std::string>& args);

}  // namespace strata::cli
