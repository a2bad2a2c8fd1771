// Stage 2 of a save (internal to the Checkpointer), as the persist thread
// runs it, one named step after another; the first failure ends the save
// and no later step runs (docs/checkpoint.md, "Saving" and "Crash
// consistency"):
//
//   every rank:  WriteRankData -> WriteRankIndex -> ReportDurable (or
//                ReportFailed when one of them failed)
//   rank 0:      WaitForRanks -> MergeRankIndexes -> PublishCommit
//                -> ApplyRetention
//
// A step is committed iff its manifest exists, and PublishCommit writes it
// only after every rank has reported a durable data stream and index, so a
// failure or crash before that point leaves the step uncommitted (its
// leftovers are removed by Storage::CollectGarbage at a later save) and the
// previous committed step intact.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/catalog.h"
#include "checkpoint/internal/staging.h"
#include "checkpoint/storage.h"
#include "comm/store.h"
#include "proto/checkpoint.pb.h"

namespace strata::checkpoint::internal {

// "rank-<5 digits>.<ext>": a rank's data stream ("data") and index
// ("index") within a step.
std::string RankFile(int rank, const char* ext);

// Writes the chunks of `parts` (those with has_chunk) and `blobs` (per-rank
// ones; global ones only on rank 0) as this rank's one data stream of
// `step`, with an XXH3-64 checksum per `block_bytes`, and makes it durable
// (DataSink::Finish). Chunks of 1 MiB or more start 4 KiB-aligned in the
// stream (zero padding before them), so the file storage writes them from
// page-aligned memory without a copy; checksums are computed by helper
// threads while the chunks are written. Returns the index of what it wrote. On failure (the
// first failing Append or Finish, whose error it returns) the stream is
// abandoned unfinished and nothing refers to it.
// REQUIRES: block_bytes > 0; the parts' data is staged (stays unchanged).
StatusOr<RankIndex> WriteRankData(Storage& storage, int64_t step, int rank,
                                  size_t block_bytes,
                                  const std::vector<Part>& parts,
                                  const std::vector<Blob>& blobs);

// Writes `index` as this rank's "rank-<rank>.index" of `step`, atomically
// and durably (Storage::PutMeta); the storage's error on failure.
Status WriteRankIndex(Storage& storage, int64_t step, const RankIndex& index);

// Tells the commit leader that this rank's data and index of `step` are
// durable: sets ckpt/<step>/done/<rank> in `store`. The store's error on
// failure (then rank 0 times out in WaitForRanks).
Status ReportDurable(comm::Store& store, int64_t step, int rank);

// Tells the commit leader that this rank's save of `step` failed with
// `error`: sets the same key as ReportDurable to "failed: <message>", so
// rank 0 stops waiting at once instead of at its commit timeout.
// Best-effort (a store error is dropped: the leader then times out).
void ReportFailed(comm::Store& store, int64_t step, int rank,
                  const Status& error);

// Rank 0: blocks until ranks 0..world_size-1 have all reported `step`
// (ReportDurable or ReportFailed). Aborted naming the first rank that
// reported a failure and its message; the store's error on failure,
// DeadlineExceeded after `timeout`.
Status WaitForRanks(comm::Store& store, int64_t step, int world_size,
                    std::chrono::milliseconds timeout);

// Rank 0: reads the ranks' indexes of `step` and merges them into its
// manifest (tensors in order of first appearance, each with every rank's
// chunks; every blob). Writes nothing. DataLoss naming the index when one
// cannot be read or parsed; InvalidArgument naming tensor and rank when
// ranks saved a tensor with different dtypes or global shapes.
StatusOr<Manifest> MergeRankIndexes(Storage& storage, int64_t step,
                                    int world_size);

// Rank 0: commits the step of `manifest`: writes "manifest.pb" atomically
// and durably (the commit point), then "LATEST", then, with a `catalog`
// (may be null), the catalog entry for `job` and `uri`, reconciling the
// catalog with the storage's steps (Catalog::Reconcile). InvalidArgument,
// committing nothing, for a manifest without tensors. When the manifest
// write fails the step is not committed; when a later write fails the step
// is committed and loadable, and the error is still returned (the save
// reports it).
Status PublishCommit(Storage& storage, Catalog* catalog, const std::string& job,
                     const std::string& uri, const Manifest& manifest);

// Rank 0, after a commit: keeps the newest `keep_last` committed steps plus
// every step divisible by `keep_every` (when > 0) and removes the rest,
// oldest first, each uncommitted before its data goes (Storage::RemoveStep)
// and marked removed in `catalog` (may be null). Other ranks drop their
// part at their next save (Storage::CollectGarbage). A step a reader pins
// (Storage::PinStep) is skipped and logged, removed by a later retention.
// Does nothing when
// keep_last <= 0 or the committed steps cannot be listed; otherwise stops
// at, and returns, the first failing removal.
Status ApplyRetention(Storage& storage, Catalog* catalog,
                      const std::string& job, int keep_last,
                      int64_t keep_every);

// The error of a failed save of `step` to `uri` as its caller sees it:
// "checkpoint step <step> at <uri>: <st's message>; <free space>", same
// code; the free space as location.h's FreeSpace() of the checkpoint
// directory ("12.0 MiB free of 16.0 MiB on /ckpt").
Status DescribeSaveFailure(const Status& st, int64_t step,
                           const std::string& uri);

}  // namespace strata::checkpoint::internal
