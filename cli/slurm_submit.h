// `strata submit --slurm`: runs a job on a Slurm allocation through
// deploy/slurm/strata.sbatch (coordinator on the first node, one worker per
// node, `strata submit --wait`, teardown; docs/launch.md). The script is
// compiled into the binary; SubmitViaSlurm writes a copy with this
// submission's parameters filled in and calls `sbatch` on it.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace strata::cli {

struct SlurmSubmitOptions {
  std::string job_file;    // JobSpec YAML/JSON; required, must be readable
  int nodes = 0;           // sbatch --nodes (0: Slurm's default)
  int ranks_per_node = 0;  // STRATA_RANKS_PER_NODE (0: the job file's)
  int port = 0;            // STRATA_PORT (0: derived from the Slurm job id)
  // STRATA_BIN_DIR: where the allocation's nodes find strata,
  // strata-coordinator and strata-worker (a flat directory or a build tree).
  // Empty: the build tree or installation of the running `strata`.
  std::string bin_dir;
  // Directory for the filled-in script and the job's output
  // (strata-<slurm id>.out). Empty: "./.strata-slurm". Should be on a file
  // system every node sees when the job spans nodes.
  std::string work_dir;
  std::vector<std::string>
      sbatch_args;                // e.g. "--partition=gpu", "--time=1:00:00"
  bool wait = false;              // sbatch --wait: block until the job ends
  std::string sbatch = "sbatch";  // program (PATH lookup); tests use a fake
};

struct SlurmSubmission {
  std::string script;        // path of the filled-in script
  std::string slurm_job_id;  // from "Submitted batch job N"
  // With `wait`: the job's exit code as sbatch --wait reports it (0
  // succeeded, 1 failed, 2 bad input, 3 startup failed); otherwise 0.
  int exit_code = 0;
};

// The script for `opts`: the embedded strata.sbatch with an `export` line per
// set parameter (values single-quoted) at its @STRATA_PARAMETERS@ marker.
// InvalidArgument for a missing job file or a bad number.
StatusOr<std::string> RenderSlurmScript(const SlurmSubmitOptions& opts);

// Renders the script into work_dir and runs
//   sbatch [--wait] [--nodes=N] --job-name=strata --output=W/strata-%j.out
//          [sbatch_args...] SCRIPT
// with sbatch's stdout parsed and its stderr passed through.
// Errors: InvalidArgument (options), FailedPrecondition (sbatch not found:
// Slurm's client is not installed), Unavailable (sbatch failed to submit,
// with its output; Slurm may be down). With `wait`, a job that ran and
// failed is not an error: see exit_code.
StatusOr<SlurmSubmission> SubmitViaSlurm(const SlurmSubmitOptions& opts);

}  // namespace strata::cli
