// Drives SubmitViaSlurm (the code behind `strata submit --slurm`) for
// slurm_test.sh against a real Slurm:
//   strata_slurm_submit JOB_YAML WORK_DIR PORT
// submits with --wait and exits with the job's exit code; prints the error
// and exits 2 when the submission itself fails.
#include <cstdio>
#include <string>

#include "cli/slurm_submit.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s JOB_YAML WORK_DIR PORT\n", argv[0]);
    return 2;
  }
  strata::cli::SlurmSubmitOptions o;
  o.job_file = argv[1];
  o.work_dir = argv[2];
  o.port = std::stoi(argv[3]);
  o.nodes = 1;
  o.wait = true;
  auto sub = strata::cli::SubmitViaSlurm(o);
  if (!sub.ok()) {
    std::fprintf(stderr, "%s\n", sub.status().ToString().c_str());
    return 2;
  }
  std::printf("slurm job %s exit code %d script %s\n",
              sub->slurm_job_id.c_str(), sub->exit_code, sub->script.c_str());
  return sub->exit_code;
}
