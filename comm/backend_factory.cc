#include "comm/backend_factory.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/hybrid/hybrid_transport.h"
#ifdef STRATA_COMM_HAVE_MPI
#include "comm/mpi/mpi_backend.h"
#endif
#ifdef STRATA_COMM_HAVE_NCCL
#include "comm/nccl/nccl_backend.h"
#endif

namespace strata::comm {
namespace {

bool IsTransportBackend(const std::string& name) {
  return name == "shm" || name == "tcp" || name == "hybrid";
}

// The name is built and the rank, node map and store fit it.
Status Validate(const BackendOptions& o) {
  const std::vector<std::string> names = AvailableBackends();
  if (std::find(names.begin(), names.end(), o.name) == names.end()) {
    const bool known = o.name == "mpi" || o.name == "nccl";
    return absl::InvalidArgumentError(absl::StrCat(
        "comm backend '", o.name, "' ",
        known ? "is not built in (its library was not found at configure time)"
              : "is unknown",
        "; available: ", absl::StrJoin(names, ", ")));
  }
  const int size = static_cast<int>(o.node_of.size());
  if (size < 1 || o.rank < 0 || o.rank >= size) {
    return absl::InvalidArgumentError(
        absl::StrCat("comm backend '", o.name, "': rank ", o.rank,
                     " is outside the node map of ", size, " ranks"));
  }
  if (size > 1 && o.store == nullptr && o.name != "mpi") {
    return absl::InvalidArgumentError(
        absl::StrCat("comm backend '", o.name,
                     "' needs a rendezvous store for ", size, " ranks"));
  }
  const std::set<int> nodes(o.node_of.begin(), o.node_of.end());
  if (o.name == "shm" && nodes.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "comm backend 'shm' needs every rank on one node; the node map has ",
        nodes.size(), " nodes (use hybrid or tcp)"));
  }
  return absl::OkStatus();
}

// The world transport of shm, tcp or hybrid.
StatusOr<std::unique_ptr<Transport>> ConnectWorld(const BackendOptions& o) {
  const int size = static_cast<int>(o.node_of.size());
  if (size == 1) return std::move(NewInProcessTransports(1)[0]);
  const std::set<int> nodes(o.node_of.begin(), o.node_of.end());
  if (o.name == "shm" || (o.name == "hybrid" && nodes.size() == 1)) {
    return ConnectShmTransport(o.store, o.rank, size, o.shm);
  }
  if (o.name == "tcp" || static_cast<int>(nodes.size()) == size) {
    return ConnectTcpTransport(o.store, o.rank, size, o.tcp);
  }
  return ConnectHybridTransport(o.store, o.rank, o.node_of, o.tcp, o.shm);
}

#ifdef STRATA_COMM_HAVE_MPI
// MPI's world, which must be the job's world.
StatusOr<std::unique_ptr<Backend>> MpiWorld(const BackendOptions& o) {
  RETURN_IF_ERROR(EnsureMpiInitialized());
  ASSIGN_OR_RETURN(auto world, NewMpiBackend(o.group.timeout));
  const int size = static_cast<int>(o.node_of.size());
  if (world->size() != size || world->rank() != o.rank) {
    return absl::InvalidArgumentError(absl::StrCat(
        "comm backend 'mpi': MPI's world is rank ", world->rank(), " of ",
        world->size(), " but the job's is rank ", o.rank, " of ", size,
        " (start the job with mpirun -np ", size, ")"));
  }
  return world;
}
#endif

}  // namespace

std::vector<std::string> AvailableBackends() {
  std::vector<std::string> names = {"shm", "tcp", "hybrid"};
#ifdef STRATA_COMM_HAVE_MPI
  names.push_back("mpi");
#endif
#ifdef STRATA_COMM_HAVE_NCCL
  names.push_back("nccl");
#endif
  return names;
}

StatusOr<std::unique_ptr<Backend>> NewBackend(const BackendOptions& o) {
  RETURN_IF_ERROR(Validate(o));
  if (IsTransportBackend(o.name)) {
    ASSIGN_OR_RETURN(auto world, ConnectWorld(o));
    GroupOptions go = o.group;
    go.node_of = o.node_of;
    return std::make_unique<ProcessGroup>(std::move(world), go);
  }
#ifdef STRATA_COMM_HAVE_MPI
  if (o.name == "mpi") {
    return MpiWorld(o);
  }
#endif
#ifdef STRATA_COMM_HAVE_NCCL
  if (o.name == "nccl") {
    return NewNcclBackend(o.store ? o.store : NewInMemoryStore(), o.rank,
                          static_cast<int>(o.node_of.size()), o.group.timeout);
  }
#endif
  return absl::InternalError(
      absl::StrCat("comm backend '", o.name, "' has no constructor"));
}

StatusOr<std::unique_ptr<PlanGroups>> NewPlanGroups(const BackendOptions& o,
                                                    const Placement& pl) {
  RETURN_IF_ERROR(Validate(o));
  const int size = static_cast<int>(o.node_of.size());
  if (IsTransportBackend(o.name)) {
    ASSIGN_OR_RETURN(auto world, ConnectWorld(o));
    return BuildPlanGroups(std::shared_ptr<Transport>(std::move(world)), pl,
                           o.group);
  }
#ifdef STRATA_COMM_HAVE_MPI
  if (o.name == "mpi") {
    RETURN_IF_ERROR(MpiWorld(o).status());
    return BuildPlanGroups(
        o.rank, size, pl,
        [&](const std::string&, int index, const std::vector<int>& members,
            const std::vector<int>&) -> StatusOr<std::unique_ptr<Backend>> {
          const int key = static_cast<int>(
              std::find(members.begin(), members.end(), o.rank) -
              members.begin());
          return NewMpiSplitBackend(index, key, o.group.timeout);
        });
  }
#endif
#ifdef STRATA_COMM_HAVE_NCCL
  if (o.name == "nccl") {
    std::shared_ptr<Store> store = o.store ? o.store : NewInMemoryStore();
    return BuildPlanGroups(
        o.rank, size, pl,
        [&](const std::string& kind, int index, const std::vector<int>& members,
            const std::vector<int>&) -> StatusOr<std::unique_ptr<Backend>> {
          const int me = static_cast<int>(
              std::find(members.begin(), members.end(), o.rank) -
              members.begin());
          return NewNcclBackend(
              NewPrefixStore(absl::StrCat(kind, "/", index), store), me,
              static_cast<int>(members.size()), o.group.timeout);
        });
  }
#endif
  (void)size;
  return absl::InternalError(
      absl::StrCat("comm backend '", o.name, "' has no constructor"));
}

}  // namespace strata::comm
