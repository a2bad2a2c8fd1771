// Reading committed checkpoints (docs/checkpoint.md, "Loading with
// resharding"): manifests, resharding loads, blobs and verification. A
// checkpoint written under one parallelism loads under any other: each
// target box is intersected with the saved chunks of its tensor and only
// the checksum blocks that overlap it are read, verified before use.
//
// Every function takes either a URI (file:///path, a plain path or
// rocksdb:///path, opened read-only and the step pinned for the call, so
// retention cannot remove it mid-read) or an open Storage (the caller pins
// if it wants, e.g. with OpenStep). Reads only committed steps (those with
// a manifest). Thread-safe: calls share no state; concurrent loads of one
// Storage are fine.
//
// Errors: NotFound for a missing step, tensor or blob; InvalidArgument for a
// target whose dtype or global shape differ from the saved tensor's;
// DataLoss naming tensor, chunk and file (or blob and file) for a checksum
// mismatch, a short or missing file, a malformed manifest, or part of a
// target box that was never saved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/storage.h"
#include "checkpoint/tensor.h"
#include "common/status.h"
#include "proto/checkpoint.pb.h"

namespace strata::checkpoint {

// The manifest of committed step `step`: NotFound when the step has none
// (never committed, or removed); DataLoss naming the manifest when it does
// not parse, is empty or holds no tensor, names a different step, or names
// a data file that is not one path component (ValidName).
StatusOr<Manifest> ReadManifest(const std::string& uri, int64_t step);
StatusOr<Manifest> ReadManifest(Storage& storage, int64_t step);

// A cheap completeness check of committed step `step`, without checksums:
// the manifest reads (ReadManifest) and the last byte of every chunk and
// blob is there (nothing truncated or missing). DataLoss/NotFound naming
// what is wrong. Verify is the full check.
Status CheckStep(Storage& storage, int64_t step);

// The newest committed step that passes CheckStep, logging every newer
// step skipped and why; NotFound when none does (naming the skipped ones).
// With `pin`, the step is pinned (Storage::PinStep) before it is checked
// and *pin holds it on return.
StatusOr<int64_t> NewestUsableStep(Storage& storage,
                                   std::unique_ptr<StepPin>* pin = nullptr);

// A committed step opened for reading and pinned (StepPin) until this is
// destroyed.
struct PinnedStep {
  std::shared_ptr<Storage> storage;
  int64_t step = -1;
  std::unique_ptr<StepPin> pin;
};
// Opens `uri` read-only and pins `step`; with step < 0, the newest usable
// step (NewestUsableStep with a pin). The storage's error; NotFound for a
// missing step.
StatusOr<PinnedStep> OpenStep(const std::string& uri, int64_t step);

// What a Load read, for measuring read amplification
// (bytes_read / bytes_needed; 1.0 for row splits).
struct LoadStats {
  uint64_t bytes_read = 0;    // from the data streams, checksum blocks whole
  uint64_t bytes_needed = 0;  // the targets' bytes
};

// Fills each target's data with its box of the saved tensor of the same
// name, reading only the checksum blocks that overlap it, with up to 4
// threads. On failure targets may be partly written. `stats`, when given,
// is added to (not reset).
// REQUIRES: every target's data points at Bytes() writable bytes.
Status Load(const std::string& uri, int64_t step,
            std::vector<ShardedTensor>& targets, LoadStats* stats = nullptr);
Status Load(Storage& storage, int64_t step, std::vector<ShardedTensor>& targets,
            LoadStats* stats = nullptr);

// Reads and checks a blob ("<rank>/<name>" for per-rank blobs).
StatusOr<std::string> LoadBlob(const std::string& uri, int64_t step,
                               const std::string& name);
StatusOr<std::string> LoadBlob(Storage& storage, int64_t step,
                               const std::string& name);

// Re-reads and checks every block of every chunk and blob of the step; OK
// means the whole step loads.
Status Verify(const std::string& uri, int64_t step);
Status Verify(Storage& storage, int64_t step);

}  // namespace strata::checkpoint
