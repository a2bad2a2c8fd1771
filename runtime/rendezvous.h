// The start of a job's ranks over its rendezvous store, before any
// transport is built (docs/runtime.md "Rendezvous"): each rank says who it
// is and checks that the others agree, so a launch mistake fails within
// seconds with a message naming it instead of a connect timeout.
//
// Keys live in the base store under "rendezvous/<restart_count>/" for a
// launcher's tcp:// or file:// store, which serves one job (so ranks that
// disagree on the job id still meet and say so), and under
// "<job id>/<restart_count>/rendezvous/" (the attempt's namespace) for the
// coordinator's strata:// store, which every job of the cluster shares
// (there the job id cannot be checked; the worker sets it):
//   claims/R       Add counter: how many processes say they are rank R
//   rank/R/N       "rank=R world_size=W job=J host=H pid=P" of the N-th
//   ready          set by rank 0 once ranks 1..W-1 joined and agree
//   abort          "R: reason" from a rank that cannot start
// Rank 0 checks every rank's entry; every other rank checks rank 0's. A
// mismatch of WORLD_SIZE or job id, or a rank claimed twice, is published
// as abort and returned; a rank that waits sees an abort within
// kRendezvousPollInterval and returns "rank R failed: reason". Waits log
// progress
// ("waiting for rank 1 to join the rendezvous at STORE, 10s of 120").
//
// Keys are per attempt: a restarted attempt (restart_count + 1) starts
// clean. A store reused by two runs of the same job id and attempt (a
// file:// directory left over) reports duplicate ranks: use a fresh one.
#pragma once

#include <chrono>
#include <string>

#include "comm/store.h"
#include "common/status.h"
#include "placement/rank_env.h"

namespace strata {

inline constexpr std::chrono::milliseconds kRendezvousPollInterval{200};

// Joins the rendezvous of `info`'s attempt and returns once every rank of
// the job has joined with the same WORLD_SIZE and job id (rank 0 set
// "ready"). `store_name` names the store in messages. Errors:
// InvalidArgument for a mismatch or a duplicate rank (after publishing
// it); Aborted "rank R failed: reason" when another rank published an
// abort; DeadlineExceeded naming the ranks still missing after `timeout`;
// the store's error.
Status JoinRendezvous(comm::Store& store, const placement::RankEnv& info,
                      const std::string& store_name,
                      std::chrono::milliseconds timeout);

// Publishes that this rank cannot start (the abort key), so the ranks
// waiting in JoinRendezvous stop with `reason`. Best effort.
void PublishStartFailure(comm::Store& store, const placement::RankEnv& info,
                         const std::string& reason);

}  // namespace strata
