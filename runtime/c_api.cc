// The C API (include/strata/c_api.h) over strata::Runtime and the
// checkpoint module. Errors become absl::StatusCode values plus a
// thread-local message.
#include "strata/c_api.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"
#include "runtime/runtime.h"

struct strata_runtime {
  std::unique_ptr<strata::Runtime> rt;
};
struct strata_checkpointer {
  std::unique_ptr<strata::checkpoint::Checkpointer> ck;
};

namespace {

thread_local std::string g_error;

int Report(const strata::Status& s) {
  g_error = s.ok() ? "" : std::string(s.message());
  return static_cast<int>(s.code());
}

int Invalid(const char* what) {
  return Report(absl::InvalidArgumentError(what));
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
    strata::checkpoint::ShardedTensor s;
    s.name = x.name;
    s.dtype = static_cast<DType>(x.dtype);
    s.global_shape.assign(x.global_shape, x.global_shape + x.ndim);
    s.local_shape.assign(x.local_shape, x.local_shape + x.ndim);
    s.global_offset.assign(x.global_offset, x.global_offset + x.ndim);
    s.replica_id = x.replica_id;
    s.num_replicas = x.num_replicas < 1 ? 1 : x.num_replicas;
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
  *out = new strata_runtime{std::move(*rt)};
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
  rt->rt->timer().Add(section, seconds);
  return Report(absl::OkStatus());
}

int strata_timer_end_step(strata_runtime* rt, int64_t step, int64_t tokens,
                          double loss) {
  if (rt == nullptr) return Invalid("null runtime");
  rt->rt->timer().EndStep(step, tokens, loss);
  return Report(absl::OkStatus());
}

int strata_timer_set_total_steps(strata_runtime* rt, int64_t total) {
  if (rt == nullptr) return Invalid("null runtime");
  if (total < 0) return Invalid("negative total steps");
  rt->rt->timer().SetTotalSteps(total);
  return Report(absl::OkStatus());
}

int strata_ckpt_open(strata_runtime* rt, const char* uri, int keep_last,
                     strata_checkpointer** out) {
  if (rt == nullptr || out == nullptr) return Invalid("null argument");
  auto ck = rt->rt->NewCheckpointer(uri == nullptr ? "" : uri, keep_last);
  if (!ck.ok()) return Report(ck.status());
  *out = new strata_checkpointer{std::move(*ck)};
  return Report(absl::OkStatus());
}

int strata_ckpt_save(strata_checkpointer* ck, int64_t step,
                     const strata_tensor* tensors, int num_tensors,
                     const strata_blob* blobs, int num_blobs) {
  if (ck == nullptr) return Invalid("null checkpointer");
  auto t = Tensors(tensors, num_tensors);
  if (!t.ok()) return Report(t.status());
  std::vector<strata::checkpoint::Blob> b;
  for (int i = 0; i < num_blobs; ++i) {
    if (blobs[i].name == nullptr ||
        (blobs[i].data == nullptr && blobs[i].size)) {
      return Invalid("blob: name and data are required");
    }
    b.push_back(
        {blobs[i].name, blobs[i].per_rank != 0,
         std::string(static_cast<const char*>(blobs[i].data), blobs[i].size)});
  }
  return Report(ck->ck->SaveAsync(step, *t, b).status());
}

int strata_ckpt_wait(strata_checkpointer* ck) {
  if (ck == nullptr) return Invalid("null checkpointer");
  return Report(ck->ck->Wait());
}

int strata_ckpt_close(strata_checkpointer* ck) {
  if (ck == nullptr) return Report(absl::OkStatus());
  int rc = Report(ck->ck->Wait());
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
