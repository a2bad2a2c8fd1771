// The C API (include/strata/c_api.h) over strata::Runtime and the
// checkpoint module. Errors become absl::StatusCode values plus a
// thread-local message.
#include "strata/c_api.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"
#include "runtime/runtime.h"

struct strata_runtime {
  std::unique_ptr<strata::Runtime> rt;
  std::vector<std::string> sections;  // added since the last end_step
  // strata_inplace_rejoin agreed on a step once in this process (a
  // replacement's first call only agrees).
  bool agreed = false;
};
struct strata_checkpointer {
  std::unique_ptr<strata::checkpoint::Checkpointer> ck;
  // The rank's step telemetry: waiting for saves is a phase (below).
  strata::StepTimer* timer = nullptr;
  // The newest step this handle may not save again: the newest committed
  // step when it first saved, then each step it saved (-1: none yet).
  int64_t last_step = -1;
  bool checked_committed = false;
};

namespace {

thread_local std::string g_error;

int Report(const strata::Status& s) {
  g_error = s.ok() ? "" : std::string(s.message());
  return static_cast<int>(s.code());
}

int Invalid(const std::string& what) {
  return Report(absl::InvalidArgumentError(what));
}

// A step report travels as one ZeroMQ message that the worker drops above
// 64 KiB (worker/telemetry.h). Bounding the sections of one step keeps a
// report well under it: 128 sections x (64-byte name + ~12 bytes of map
// entry framing) < 10 KiB, plus the fixed fields and the per-peer links.
constexpr size_t kMaxSectionName = 64;
constexpr size_t kMaxSectionsPerStep = 128;

// A printable name (section, tensor, blob): non-empty, at most `max`
// bytes, no control characters.
absl::Status CheckName(const char* what, const char* name, size_t max) {
  if (name == nullptr || *name == '\0') {
    return absl::InvalidArgumentError(std::string(what) + " name is empty");
  }
  const size_t n = std::strlen(name);
  if (n > max) {
    return absl::InvalidArgumentError(std::string(what) + " name '" +
                                      std::string(name, 32) + "...' is " +
                                      std::to_string(n) + " bytes (at most " +
                                      std::to_string(max) + ")");
  }
  for (size_t i = 0; i < n; ++i) {
    if (static_cast<unsigned char>(name[i]) < 0x20) {
      return absl::InvalidArgumentError(std::string(what) + " name '" + name +
                                        "' has a control character");
    }
  }
  return absl::OkStatus();
}

strata::StatusOr<std::vector<strata::checkpoint::ShardedTensor>> Tensors(
    const strata_tensor* t, int n) {
  using strata::checkpoint::DType;
  std::vector<strata::checkpoint::ShardedTensor> out;
  if (n < 0 || (n > 0 && t == nullptr)) {
    return absl::InvalidArgumentError("tensors: null array or negative count");
  }
  for (int i = 0; i < n; ++i) {
    const strata_tensor& x = t[i];
    if (x.name == nullptr || x.ndim < 0 || x.dtype < 0 || x.dtype > 6 ||
        (x.ndim > 0 && (x.global_shape == nullptr || x.local_shape == nullptr ||
                        x.global_offset == nullptr))) {
      return absl::InvalidArgumentError(
          "tensor " + std::to_string(i) +
          ": name, dtype 0-6 and ndim shapes/offsets are required");
    }
    RETURN_IF_ERROR(CheckName("tensor", x.name, 4096));
    if (x.num_replicas < 1 || x.replica_id < 0 ||
        x.replica_id >= x.num_replicas) {
      return absl::InvalidArgumentError(
          std::string("tensor '") + x.name + "': replica_id " +
          std::to_string(x.replica_id) + " of num_replicas " +
          std::to_string(x.num_replicas) +
          " (need num_replicas >= 1 and 0 <= replica_id < num_replicas)");
    }
    strata::checkpoint::ShardedTensor s;
    s.name = x.name;
    s.dtype = static_cast<DType>(x.dtype);
    s.global_shape.assign(x.global_shape, x.global_shape + x.ndim);
    s.local_shape.assign(x.local_shape, x.local_shape + x.ndim);
    s.global_offset.assign(x.global_offset, x.global_offset + x.ndim);
    s.replica_id = x.replica_id;
    s.num_replicas = x.num_replicas;
    s.data = x.data;
    RETURN_IF_ERROR(s.Validate());
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace

extern "C" {

const char* strata_last_error(void) { return g_error.c_str(); }

int strata_init(int build_groups, strata_runtime** out) {
  if (out == nullptr) return Invalid("strata_init: out is null");
  strata::RuntimeOptions o;
  o.build_groups = build_groups != 0;
  auto rt = strata::Runtime::FromEnv(o);
  if (!rt.ok()) return Report(rt.status());
  *out = new strata_runtime{std::move(*rt), {}};
  return Report(absl::OkStatus());
}

void strata_finalize(strata_runtime* rt) { delete rt; }

int strata_get_placement(const strata_runtime* rt, strata_placement* out) {
  if (rt == nullptr || out == nullptr) return Invalid("null argument");
  const strata::RankInfo& i = rt->rt->info();
  *out = {i.rank,         i.world_size, i.local_rank, i.local_world_size,
          i.tp,           i.pp,         i.dp,         i.cp,
          i.tp_rank,      i.pp_rank,    i.dp_rank,    i.cp_rank,
          i.restart_count};
  return Report(absl::OkStatus());
}

const char* strata_job_id(const strata_runtime* rt) {
  return rt == nullptr ? "" : rt->rt->info().job_id.c_str();
}

const char* strata_ckpt_uri(const strata_runtime* rt) {
  return rt == nullptr ? "" : rt->rt->info().ckpt_uri.c_str();
}

int strata_timer_add(strata_runtime* rt, const char* section, double seconds) {
  if (rt == nullptr || section == nullptr) return Invalid("null argument");
  if (auto s = CheckName("section", section, kMaxSectionName); !s.ok()) {
    return Report(s);
  }
  if (!std::isfinite(seconds) || seconds < 0) {
    return Invalid(std::string("section '") + section + "': " +
                   std::to_string(seconds) +
                   " seconds (need a finite value >= 0)");
  }
  std::vector<std::string>& names = rt->sections;
  if (std::find(names.begin(), names.end(), section) == names.end()) {
    if (names.size() >= kMaxSectionsPerStep) {
      return Invalid(std::string("section '") + section + "': a step has at most " +
                     std::to_string(kMaxSectionsPerStep) +
                     " sections (the report must fit the worker's 64 KiB "
                     "telemetry frame)");
    }
    names.push_back(section);
  }
  rt->rt->timer().Add(section, seconds);
  return Report(absl::OkStatus());
}

int strata_timer_end_step(strata_runtime* rt, int64_t step, int64_t tokens,
                          double loss) {
  if (rt == nullptr) return Invalid("null runtime");
  if (step < 0) return Invalid("end_step: step " + std::to_string(step) + " < 0");
  if (tokens < 0) {
    return Invalid("end_step: tokens " + std::to_string(tokens) + " < 0");
  }
  if (std::isinf(loss)) return Invalid("end_step: loss is infinite");
  rt->sections.clear();
  rt->rt->timer().EndStep(step, tokens, loss);
  return Report(absl::OkStatus());
}

int strata_phase_begin(strata_runtime* rt, const char* name,
                       double deadline_seconds) {
  if (rt == nullptr || name == nullptr) return Invalid("null argument");
  if (auto s = CheckName("phase", name, kMaxSectionName); !s.ok()) {
    return Report(s);
  }
  if (!std::isfinite(deadline_seconds) || deadline_seconds < 0) {
    return Invalid(std::string("phase '") + name + "': deadline " +
                   std::to_string(deadline_seconds) +
                   " seconds (need a finite value >= 0; 0: the default)");
  }
  rt->rt->timer().BeginPhase(name, deadline_seconds);
  return Report(absl::OkStatus());
}

int strata_phase_end(strata_runtime* rt) {
  if (rt == nullptr) return Invalid("null runtime");
  rt->rt->timer().EndPhase();
  return Report(absl::OkStatus());
}

int strata_timer_set_total_steps(strata_runtime* rt, int64_t total) {
  if (rt == nullptr) return Invalid("null runtime");
  if (total < 0) return Invalid("negative total steps");
  rt->rt->timer().SetTotalSteps(total);
  return Report(absl::OkStatus());
}

int strata_inplace_enable(strata_runtime* rt) {
  if (rt == nullptr) return Invalid("null runtime");
  return Report(rt->rt->EnableInPlace());
}

int strata_inplace_generation(strata_runtime* rt, int* generation) {
  if (rt == nullptr || generation == nullptr) return Invalid("null argument");
  *generation = rt->rt->generation();
  return Report(absl::OkStatus());
}

int strata_inplace_rejoin(strata_runtime* rt, int64_t timeout_ms,
                          int64_t memory_step, int64_t checkpoint_step,
                          int64_t* agreed_step) {
  if (rt == nullptr || agreed_step == nullptr) return Invalid("null argument");
  if (timeout_ms < 0 || memory_step < -1 || checkpoint_step < 0) {
    return Invalid("rejoin: timeout_ms >= 0, memory_step >= -1 and "
                   "checkpoint_step >= 0 are needed");
  }
  strata::Runtime& r = *rt->rt;
  if (!r.in_place()) {
    return Report(absl::FailedPreconditionError(
        "in-place restart is not enabled (strata_inplace_enable)"));
  }
  // A replacement that has not agreed yet only agrees; a survivor waits for
  // the next generation and re-forms first.
  if (!rt->agreed && r.generation() > 0) {
    auto at = r.AgreeStep(memory_step, checkpoint_step);
    if (!at.ok()) return Report(at.status());
    rt->agreed = true;
    *agreed_step = *at;
    return Report(absl::OkStatus());
  }
  auto g = r.AwaitGeneration(std::chrono::milliseconds(timeout_ms));
  if (!g.ok()) return Report(g.status());
  if (auto s = r.Reform(); !s.ok()) return Report(s);
  auto at = r.AgreeStep(memory_step, checkpoint_step);
  if (!at.ok()) return Report(at.status());
  rt->agreed = true;
  *agreed_step = *at;
  return Report(absl::OkStatus());
}

int strata_ckpt_open(strata_runtime* rt, const char* uri, int keep_last,
                     strata_checkpointer** out) {
  if (rt == nullptr || out == nullptr) return Invalid("null argument");
  auto ck = rt->rt->NewCheckpointer(uri == nullptr ? "" : uri, keep_last);
  if (!ck.ok()) return Report(ck.status());
  *out = new strata_checkpointer{std::move(*ck), &rt->rt->timer()};
  return Report(absl::OkStatus());
}

namespace {
// Waiting for saves to persist (the last one of a run can take longer than
// a step deadline) is work outside the step loop: a phase with the job
// policy's phase deadline, unless the rank is in one of its own. The wait
// stays part of the step it happens in (the step clock runs on).
strata::Status WaitInPhase(strata_checkpointer* ck) {
  strata::StepTimer* t = ck->timer;
  const bool phase = t != nullptr && !t->in_phase();
  if (phase) t->BeginPhase("checkpoint_wait", 0);
  strata::Status s = ck->ck->Wait();
  if (phase) t->EndPhase(/*restart_step_clock=*/false);
  return s;
}
}  // namespace

// strata_ckpt_save and strata_ckpt_save_borrowed.
static int CkptSave(strata_checkpointer* ck, int64_t step,
             const strata_tensor* tensors, int num_tensors,
             const strata_blob* blobs, int num_blobs, bool borrow) {
  if (ck == nullptr) return Invalid("null checkpointer");
  if (step < 0) {
    return Invalid("checkpoint step " + std::to_string(step) + " < 0");
  }
  if (!ck->checked_committed) {
    // A committed step is never replaced: saving it again would silently
    // swap its data under readers and the catalog.
    auto latest = ck->ck->Latest();
    if (!latest.ok() && !absl::IsNotFound(latest.status())) {
      return Report(latest.status());
    }
    if (latest.ok()) ck->last_step = *latest;
    ck->checked_committed = true;
  }
  if (step <= ck->last_step) {
    return Report(absl::AlreadyExistsError(
        "checkpoint step " + std::to_string(step) +
        " is not newer than step " + std::to_string(ck->last_step) +
        " (already committed or being saved); steps must increase: save to "
        "a new checkpoint URI or remove the newer steps first"));
  }
  if (num_blobs < 0 || (num_blobs > 0 && blobs == nullptr)) {
    return Invalid("blobs: null array or negative count");
  }
  auto t = Tensors(tensors, num_tensors);
  if (!t.ok()) return Report(t.status());
  std::vector<strata::checkpoint::Blob> b;
  for (int i = 0; i < num_blobs; ++i) {
    if (auto s = CheckName("blob", blobs[i].name, 4096); !s.ok()) {
      return Report(s);
    }
    if (blobs[i].data == nullptr && blobs[i].size) {
      return Invalid(std::string("blob '") + blobs[i].name +
                     "': data is null");
    }
    b.push_back(
        {blobs[i].name, blobs[i].per_rank != 0,
         std::string(static_cast<const char*>(blobs[i].data), blobs[i].size)});
  }
  auto handle = ck->ck->SaveAsync(step, *t, b, borrow);
  if (handle.ok()) ck->last_step = step;
  return Report(handle.status());
}

int strata_ckpt_save(strata_checkpointer* ck, int64_t step,
                     const strata_tensor* tensors, int num_tensors,
                     const strata_blob* blobs, int num_blobs) {
  return CkptSave(ck, step, tensors, num_tensors, blobs, num_blobs,
                  /*borrow=*/false);
}

int strata_ckpt_save_borrowed(strata_checkpointer* ck, int64_t step,
                              const strata_tensor* tensors, int num_tensors,
                              const strata_blob* blobs, int num_blobs) {
  return CkptSave(ck, step, tensors, num_tensors, blobs, num_blobs,
                  /*borrow=*/true);
}

int strata_ckpt_wait(strata_checkpointer* ck) {
  if (ck == nullptr) return Invalid("null checkpointer");
  return Report(WaitInPhase(ck));
}

int strata_ckpt_close(strata_checkpointer* ck) {
  if (ck == nullptr) return Report(absl::OkStatus());
  int rc = Report(WaitInPhase(ck));
  std::string error = g_error;
  delete ck;
  g_error = error;
  return rc;
}

int strata_ckpt_latest(const char* uri, int64_t* step) {
  if (uri == nullptr || step == nullptr) return Invalid("null argument");
  auto latest = strata::checkpoint::LatestStep(uri);
  if (absl::IsNotFound(latest.status())) {
    *step = -1;
    return Report(absl::OkStatus());
  }
  if (!latest.ok()) return Report(latest.status());
  *step = *latest;
  return Report(absl::OkStatus());
}

int strata_ckpt_load(const char* uri, int64_t step, strata_tensor* tensors,
                     int num_tensors) {
  if (uri == nullptr) return Invalid("null uri");
  if (step < 0) {
    return Invalid("checkpoint step " + std::to_string(step) + " < 0");
  }
  auto t = Tensors(tensors, num_tensors);
  if (!t.ok()) return Report(t.status());
  return Report(strata::checkpoint::Load(uri, step, *t));
}

int strata_ckpt_load_blob(const char* uri, int64_t step, const char* name,
                          void* buf, size_t capacity, size_t* size) {
  if (uri == nullptr || name == nullptr || size == nullptr) {
    return Invalid("null argument");
  }
  auto blob = strata::checkpoint::LoadBlob(uri, step, name);
  if (!blob.ok()) return Report(blob.status());
  *size = blob->size();
  if (buf != nullptr)
    std::memcpy(buf, blob->data(), std::min(capacity, blob->size()));
  return Report(absl::OkStatus());
}

}  // extern "C"
