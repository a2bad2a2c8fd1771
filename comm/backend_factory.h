// Chooses and connects a Backend by name (docs/comm.md "Choosing a
// backend"):
//   shm     shared memory; every rank on one node
//   tcp     strata's sockets between every pair
//   hybrid  shm among a node's ranks, tcp between nodes (plain shm or tcp
//           when the node map needs only one); the default
//   mpi     Open MPI's communicator (a job started by mpirun; built when
//           MPI is found); initialises MPI if nobody has
//   nccl    NCCL over GPU buffers (built when CUDA and NCCL are found; uses
//           the current CUDA device)
// The caller passes the name (e.g. from STRATA_COMM_BACKEND); the factory
// reads no environment. Connecting is collective: every rank of the world
// calls the same function with the same name and node map.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "comm/backend.h"
#include "comm/plan_groups.h"
#include "comm/process_group.h"
#include "comm/shm/shm_transport.h"
#include "comm/store.h"
#include "comm/tcp/tcp_transport.h"
#include "proto/plan.pb.h"

namespace strata::comm {

struct BackendOptions {
  std::string name = "hybrid";
  int rank = 0;
  // node_of[r]: node index of world rank r; its size is the world size.
  std::vector<int> node_of = {0};
  // Rendezvous for shm, tcp, hybrid and nccl (keys are written under it as
  // is: give each world its own PrefixStore). Unused by mpi and by a world
  // of one rank.
  std::shared_ptr<Store> store;
  // Timeout of every group (all backends) and the tuner (shm, tcp, hybrid).
  // node_of is filled in per group.
  GroupOptions group;
  TcpOptions tcp;
  ShmOptions shm;
};

// The backend names this build has, in the order above.
std::vector<std::string> AvailableBackends();

// One group of every world rank. InvalidArgument naming the value and the
// available backends when `name` is unknown or not built, or when the rank,
// node map or store does not fit the backend; the backend's own errors when
// connecting fails (e.g. DeadlineExceeded naming ranks that never came).
StatusOr<std::unique_ptr<Backend>> NewBackend(const BackendOptions& options);

// This rank's TP/CP/DP/PP groups of `placement` (world rank = placement
// rank; comm/plan_groups.h): views over one world transport for shm, tcp
// and hybrid, split communicators for mpi, one communicator per group for
// nccl.
StatusOr<std::unique_ptr<PlanGroups>> NewPlanGroups(
    const BackendOptions& options, const Placement& placement);

}  // namespace strata::comm
