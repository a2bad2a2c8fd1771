#include "train/trainer.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/panel_gemm.h"
#include "train/adamw.h"
#include "train/block.h"
#include "train/ops.h"

namespace strata::train {
namespace {

using comm::DataType;
using comm::ReduceOp;
using SteadyClock = std::chrono::steady_clock;

int SizeOf(comm::Backend* b) { return b == nullptr ? 1 : b->size(); }

Status Sync(comm::Backend* b, const std::shared_ptr<comm::Work>& w) {
  (void)b;
  return w->Wait();
}

Status AllReduce(comm::Backend* b, void* buf, size_t n, DataType t) {
  if (SizeOf(b) == 1) return absl::OkStatus();
  return b->AllReduce(buf, n, t, ReduceOp::kSum)->Wait();
}

}  // namespace

// One micro-batch on this stage: x0 is its input (embeddings, or the
// previous stage's output), out its output, dy the gradient of out (from
// the next stage), dx the gradient of x0 (to the previous stage).
struct Trainer::MicroBatch {
  std::vector<int32_t> tokens;  // seqs x (S + 1)
  std::vector<float> x0, out, meanf, rstdf, hf, dhf, dy, dx;
  std::vector<BlockActs> acts;
};

Trainer::Trainer(const TrainOptions& o, const TrainGroups& g, DataSource data)
    : o_(o),
      g_(g),
      data_(std::move(data)),
      params_(o.model, o.par),
      panels_(params_, o.pack_weights),
      first_(o.par.pp_rank == 0),
      last_(o.par.pp_rank == o.par.pp - 1) {}

Trainer::~Trainer() = default;

Status Trainer::CheckGroups(const TrainOptions& o, const TrainGroups& g) {
  struct {
    comm::Backend* b;
    int size, rank;
    const char* what;
  } checks[] = {{g.tp, o.par.tp, o.par.tp_rank, "tp"},
                {g.pp, o.par.pp, o.par.pp_rank, "pp"},
                {g.dp, o.par.dp, o.par.dp_rank, "dp"}};
  for (const auto& c : checks) {
    if (SizeOf(c.b) != c.size || (c.b != nullptr && c.b->rank() != c.rank)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the ", c.what, " group (size ", SizeOf(c.b), ") does not match ",
          c.what, "=", c.size, " rank ", c.rank));
    }
  }
  return absl::OkStatus();
}

StatusOr<std::unique_ptr<Trainer>> Trainer::Create(const TrainOptions& o,
                                                   const TrainGroups& g) {
  RETURN_IF_ERROR(ValidateSplit(o.model, o.par, o.global_batch, o.micro_batch));
  RETURN_IF_ERROR(CheckGroups(o, g));
  if (o.ckpt_every < 0 || o.keep_last < 1 || o.max_save_failures < 1 ||
      o.max_rollbacks < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint options out of range: ckpt_every ",
                     o.ckpt_every, " (>= 0), keep_last ", o.keep_last,
                     " (>= 1), max_save_failures ", o.max_save_failures,
                     " (>= 1), max_rollbacks ", o.max_rollbacks, " (>= 0)"));
  }
  if (o.ckpt_uri.empty() &&
      (o.ckpt_every > 0 ||
       o.on_nonfinite == TrainOptions::OnNonFinite::kRollback)) {
    return absl::InvalidArgumentError(
        "checkpoints or rollbacks need a checkpoint URI");
  }
  ASSIGN_OR_RETURN(DataSource data, DataSource::Open(o.data_file, o.model.vocab,
                                                     o.model.seq, o.seed));
  std::unique_ptr<Trainer> t(new Trainer(o, g, std::move(data)));
  t->params_.Init(o.seed);
  t->micro_batches_ = o.global_batch / (o.par.dp * o.micro_batch);
  const size_t n = t->params_.w.size();
  const int dp = o.par.dp;
  t->padded_ = (n + dp - 1) / dp * dp;
  t->params_.w.resize(t->padded_, 0.0f);
  t->params_.g.resize(t->padded_, 0.0f);
  if (o.zero1) {
    t->shard_size_ = t->padded_ / dp;
    t->shard_begin_ = t->shard_size_ * o.par.dp_rank;
    t->grad_shard_.assign(t->shard_size_, 0.0f);
  } else {
    t->shard_size_ = n;
    t->shard_begin_ = 0;
  }
  t->m_.assign(t->shard_size_, 0.0f);
  t->v_.assign(t->shard_size_, 0.0f);
  // The optimizer's runs: each shard clipped to this rank's range
  // [shard_begin_, shard_begin_ + shard_size_) and to the real parameters
  // (the padding is neither updated nor counted).
  for (const auto& s : t->params_.shards) {
    const size_t b = std::max(s.start, t->shard_begin_);
    const size_t e =
        std::min({s.start + s.size, t->shard_begin_ + t->shard_size_, n});
    if (b >= e) continue;
    const bool counted =
        !s.tied_copy && (!s.tp_replicated || o.par.tp_rank == 0);
    t->segments_.push_back(
        {b - t->shard_begin_, e - t->shard_begin_, s.decay, counted});
  }
  // 1F1B keeps at most warm-up + 1 micro-batches alive; micro-batch i uses
  // slot i mod that, and slots keep their buffers from step to step.
  const int warmup = std::min(o.par.pp - o.par.pp_rank - 1, t->micro_batches_);
  t->slots_.resize(std::min(warmup + 1, t->micro_batches_));
  t->OpenCheckpointer();
  return t;
}

void Trainer::Abandon() {
  dp_work_.clear();
  // Its destructor waits for the saves in flight: they end (failed) once
  // the abandoned generation's store is aborted. A save that committed
  // before is a good state.
  ckpt_.reset();
  mem_ckpt_.reset();
  last_save_ = checkpoint::SaveHandle();
  mem_save_ = checkpoint::SaveHandle();
  last_save_error_ = absl::OkStatus();
}

Status Trainer::Rejoin(const TrainGroups& g) {
  RETURN_IF_ERROR(CheckGroups(o_, g));
  if (g.world_rank != g_.world_rank || g.world_size != g_.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "re-formed groups are rank ", g.world_rank, " of ", g.world_size,
        ", this trainer rank ", g_.world_rank, " of ", g_.world_size));
  }
  Abandon();
  g_ = g;
  OpenCheckpointer();
  return absl::OkStatus();
}

Status Trainer::Forward(MicroBatch& mb, int index, double* loss_sum) {
  const ModelConfig& m = o_.model;
  const int seqs = o_.micro_batch, s = m.seq, h = m.hidden;
  const int t = seqs * s;
  const int64_t base =
      step_ * o_.global_batch +
      static_cast<int64_t>(o_.par.dp_rank) * (o_.global_batch / o_.par.dp) +
      static_cast<int64_t>(index) * seqs;
  mb.tokens.resize(static_cast<size_t>(seqs) * (s + 1));
  for (int j = 0; j < seqs; ++j)
    data_.Sample(base + j, &mb.tokens[j * (s + 1)]);
  mb.x0.resize(static_cast<size_t>(t) * h);  // received already if !first_
  if (first_) {
    const float* wte = params_.W(params_.wte);
    const float* wpe = params_.W(params_.wpe);
    for (int j = 0; j < seqs; ++j) {
      for (int p = 0; p < s; ++p) {
        const int32_t tok = mb.tokens[j * (s + 1) + p];
        float* row = &mb.x0[(static_cast<size_t>(j) * s + p) * h];
        for (int c = 0; c < h; ++c) row[c] = wte[tok * h + c] + wpe[p * h + c];
      }
    }
  }
  BlockDims dims{
      seqs, s, h, m.heads / o_.par.tp, h / m.heads, m.ffn() / o_.par.tp};
  // Block l reads acts[l].x and writes its output straight into
  // acts[l + 1].x (the last into out): no copies between blocks.
  const size_t th = static_cast<size_t>(t) * h;
  const size_t layers = params_.layers.size();
  mb.acts.resize(layers);
  mb.out.resize(th);
  const float* in = mb.x0.data();
  for (size_t l = 0; l < layers; ++l) {
    float* y = mb.out.data();
    if (l + 1 < layers) {
      mb.acts[l + 1].x.resize(th);
      y = mb.acts[l + 1].x.data();
    }
    RETURN_IF_ERROR(BlockForward(params_, &panels_, params_.layers[l], dims,
                                 g_.tp, in, &mb.acts[l], y));
    in = y;
  }
  if (layers == 0) std::copy_n(mb.x0.data(), th, mb.out.data());
  if (!last_) return absl::OkStatus();
  mb.hf.resize(mb.out.size());
  mb.meanf.resize(t);
  mb.rstdf.resize(t);
  LayerNorm(mb.out.data(), params_.W(params_.lnf_g), params_.W(params_.lnf_b),
            t, h, mb.hf.data(), mb.meanf.data(), mb.rstdf.data());
  std::vector<int32_t>& targets = targets_;
  targets.resize(t);
  for (int j = 0; j < seqs; ++j) {
    for (int p = 0; p < s; ++p)
      targets[j * s + p] = mb.tokens[j * (s + 1) + p + 1];
  }
  mb.dhf.resize(mb.hf.size());
  const float scale =
      1.0f / (static_cast<float>(o_.global_batch) * static_cast<float>(s));
  *loss_sum += CrossEntropyTied(
      mb.hf.data(), params_.W(params_.wte), targets.data(), t, h, m.vocab,
      scale, mb.dhf.data(), params_.G(params_.wte),
      panels_.Forward(params_.wte), panels_.Backward(params_.wte));
  return absl::OkStatus();
}

Status Trainer::Backward(MicroBatch& mb, bool last_micro_batch,
                         std::vector<std::shared_ptr<comm::Work>>* dp_work) {
  const ModelConfig& m = o_.model;
  const int seqs = o_.micro_batch, s = m.seq, h = m.hidden, t = seqs * s;
  // Two ping-pong buffers of the trainer, swapped with the micro-batch's
  // received dy and sent dx: buffers change hands, none is allocated once
  // every one has its size.
  std::vector<float>& dy = bwd_dy_;
  std::vector<float>& dx = bwd_dx_;
  dy.resize(static_cast<size_t>(t) * h);
  dx.resize(dy.size());
  if (last_) {
    LayerNormBackward(mb.out.data(), params_.W(params_.lnf_g), mb.meanf.data(),
                      mb.rstdf.data(), mb.dhf.data(), t, h, dy.data(),
                      params_.G(params_.lnf_g), params_.G(params_.lnf_b));
  } else {
    dy.swap(mb.dy);  // received from the next stage
  }
  BlockDims dims{
      seqs, s, h, m.heads / o_.par.tp, h / m.heads, m.ffn() / o_.par.tp};
  const bool bucket = last_micro_batch && !o_.zero1 && o_.par.dp > 1;
  for (int l = static_cast<int>(params_.layers.size()) - 1; l >= 0; --l) {
    const LayerParams& lp = params_.layers[l];
    RETURN_IF_ERROR(BlockBackward(params_, &panels_, lp, dims, g_.tp,
                                  mb.acts[l], dy.data(), dx.data()));
    dy.swap(dx);
    if (bucket) {
      // This block's gradients are final: reduce them while the backward
      // of the earlier blocks runs.
      dp_work->push_back(g_.dp->AllReduce(params_.g.data() + lp.begin,
                                          lp.end - lp.begin, DataType::kF32,
                                          ReduceOp::kSum));
    }
  }
  if (first_) {
    float* gwte = params_.G(params_.wte);
    float* gwpe = params_.G(params_.wpe);
    for (int j = 0; j < seqs; ++j) {
      for (int p = 0; p < s; ++p) {
        const int32_t tok = mb.tokens[j * (s + 1) + p];
        const float* row = &dy[(static_cast<size_t>(j) * s + p) * h];
        for (int c = 0; c < h; ++c) {
          gwte[tok * h + c] += row[c];
          gwpe[p * h + c] += row[c];
        }
      }
    }
  } else {
    mb.dx.swap(dy);
  }
  return absl::OkStatus();
}

Status Trainer::ReduceGradients(
    std::vector<std::shared_ptr<comm::Work>>& dp_work) {
  // Tied embedding: the first stage's and the last stage's copies get the
  // sum of both gradients; middle stages contribute zeros.
  if (o_.par.pp > 1) {
    const size_t n = static_cast<size_t>(o_.model.vocab) * o_.model.hidden;
    std::vector<float>& buf = tied_buf_;
    buf.assign(n, 0.0f);
    if (params_.wte >= 0) std::copy_n(params_.G(params_.wte), n, buf.data());
    RETURN_IF_ERROR(AllReduce(g_.pp, buf.data(), n, DataType::kF32));
    if (params_.wte >= 0) std::copy_n(buf.data(), n, params_.G(params_.wte));
  }
  if (o_.zero1) {
    if (o_.par.dp == 1) {
      std::copy_n(params_.g.data(), shard_size_, grad_shard_.data());
      return absl::OkStatus();
    }
    return g_.dp
        ->ReduceScatter(params_.g.data(), grad_shard_.data(), padded_,
                        DataType::kF32, ReduceOp::kSum)
        ->Wait();
  }
  for (auto& w : dp_work) RETURN_IF_ERROR(Sync(g_.dp, w));
  if (o_.par.dp == 1) return absl::OkStatus();
  for (int idx : {params_.wte, params_.wpe, params_.lnf_g, params_.lnf_b}) {
    if (idx < 0) continue;
    RETURN_IF_ERROR(AllReduce(g_.dp, params_.G(idx), params_.shards[idx].size,
                              DataType::kF32));
  }
  return absl::OkStatus();
}

Status Trainer::AnyRank(bool* flag) {
  double v = *flag ? 1.0 : 0.0;
  RETURN_IF_ERROR(AllReduce(g_.tp, &v, 1, DataType::kF64));
  RETURN_IF_ERROR(AllReduce(g_.pp, &v, 1, DataType::kF64));
  RETURN_IF_ERROR(AllReduce(g_.dp, &v, 1, DataType::kF64));
  *flag = v > 0;
  return absl::OkStatus();
}

StatusOr<double> Trainer::ClipAndUpdate(bool* finite) {
  if (ckpt_ != nullptr) {
    // The first write to parameters and moments since the last SaveAsync:
    // its deferred staging copy ran during this step's forward and
    // backward; whatever is left of it stalls training here.
    const auto t0 = SteadyClock::now();
    ckpt_->WaitSnapshot();
    stall_s_ += std::chrono::duration<double>(SteadyClock::now() - t0).count();
  }
  if (mem_ckpt_ != nullptr) {
    const auto t0 = SteadyClock::now();
    mem_ckpt_->WaitSnapshot();
    stall_s_ += std::chrono::duration<double>(SteadyClock::now() - t0).count();
  }
  float* grads = o_.zero1 ? grad_shard_.data() : params_.g.data();
  const size_t off = shard_begin_, n = shard_size_;
  double sumsq = SquaredNorm(grads, segments_);
  RETURN_IF_ERROR(AllReduce(g_.tp, &sumsq, 1, DataType::kF64));
  RETURN_IF_ERROR(AllReduce(g_.pp, &sumsq, 1, DataType::kF64));
  if (o_.zero1) RETURN_IF_ERROR(AllReduce(g_.dp, &sumsq, 1, DataType::kF64));
  const double norm = std::sqrt(sumsq);
  AdamWStep as;
  as.coef = o_.clip_norm > 0 && norm > o_.clip_norm
                ? static_cast<float>(o_.clip_norm / (norm + 1e-6))
                : 1.0f;
  as.lr = o_.lr * std::min(1.0f, static_cast<float>(step_ + 1) /
                                     std::max(1, o_.warmup_steps));
  const double t = static_cast<double>(step_ + 1);
  as.beta1 = o_.beta1;
  as.beta2 = o_.beta2;
  as.eps = o_.eps;
  as.weight_decay = o_.weight_decay;
  as.bc1 = static_cast<float>(1.0 - std::pow(o_.beta1, t));
  as.bc2 = static_cast<float>(1.0 - std::pow(o_.beta2, t));
  float* w = params_.w.data();
  // A non-finite norm (a NaN or Inf gradient) skips the update; otherwise
  // the updated weights are checked (an overflow from a huge learning
  // rate), in the same pass.
  bool bad = !*finite || !std::isfinite(norm);
  if (!bad) {
    mutating_ = true;  // until ++step_ or a load
    bad = !AdamWUpdate(as, segments_, grads, m_.data(), v_.data(), w + off);
  }
  RETURN_IF_ERROR(AnyRank(&bad));
  *finite = !bad;
  if (bad) return norm;
  if (o_.zero1 && o_.par.dp > 1) {
    std::vector<float>& mine = gather_buf_;
    mine.assign(w + off, w + off + n);
    RETURN_IF_ERROR(
        g_.dp->AllGather(mine.data(), w, padded_, DataType::kF32)->Wait());
  }
  return norm;
}

StatusOr<StepResult> Trainer::Step() {
  const auto t0 = SteadyClock::now();
  std::fill(params_.g.begin(), params_.g.end(), 0.0f);
  // strata's GEMM kernels take as many threads as the rank's BLAS threads
  // (train/threads.h), on a team owned by the thread that steps.
  SetGemmThreads(openblas_get_num_threads());
  panels_.Pack(params_);
  // Micro-batch i lives in slots_[i % slots_.size()] (see Create).
  auto mb_at = [&](int i) -> MicroBatch& { return slots_[i % slots_.size()]; };
  std::vector<std::shared_ptr<comm::Work>>& dp_work = dp_work_;
  dp_work.clear();
  double loss_sum = 0;
  const int count = micro_batches_;
  const int warmup = std::min(o_.par.pp - o_.par.pp_rank - 1, count);
  const int remaining = count - warmup;
  const size_t act =
      static_cast<size_t>(o_.micro_batch) * o_.model.seq * o_.model.hidden;
  const int prev = first_ ? -1 : o_.par.pp_rank - 1;
  const int next = last_ ? -1 : o_.par.pp_rank + 1;
  // Point-to-point on the pipeline group. Where a stage sends to a
  // neighbour that is sending back, both sides run one SendRecv (Megatron's
  // batched send_forward_recv_backward / send_backward_recv_forward), so
  // activations larger than the transport's buffering cannot deadlock.
  auto exchange = [&](const std::vector<float>* send, int to,
                      std::vector<float>* recv, int from) -> Status {
    if (to < 0 && from < 0) return absl::OkStatus();
    if (recv != nullptr) recv->resize(act);
    return g_.pp
        ->SendRecv(send ? send->data() : nullptr, send ? act : 0, to,
                   recv ? recv->data() : nullptr, recv ? act : 0, from,
                   DataType::kF32)
        ->Wait();
  };
  // Narayanan et al. SC'21 §2.2 (1F1B): warm-up forwards, steady state of
  // one forward and one backward, cool-down backwards.
  StepResult r;
  auto timed = [](double* into, auto&& fn) -> Status {
    const auto t = SteadyClock::now();
    Status st = fn();
    *into += std::chrono::duration<double>(SteadyClock::now() - t).count();
    return st;
  };
  auto forward = [&](int i) {
    return timed(&r.forward_s, [&] { return Forward(mb_at(i), i, &loss_sum); });
  };
  auto backward = [&](int b) {
    return timed(&r.backward_s,
                 [&] { return Backward(mb_at(b), b == count - 1, &dp_work); });
  };
  for (int i = 0; i < warmup; ++i) {
    RETURN_IF_ERROR(
        exchange(nullptr, -1, first_ ? nullptr : &mb_at(i).x0, prev));
    RETURN_IF_ERROR(forward(i));
    RETURN_IF_ERROR(
        exchange(last_ ? nullptr : &mb_at(i).out, next, nullptr, -1));
  }
  if (remaining > 0) {
    RETURN_IF_ERROR(
        exchange(nullptr, -1, first_ ? nullptr : &mb_at(warmup).x0, prev));
  }
  for (int k = 0; k < remaining; ++k) {
    const int f = warmup + k, b = k;
    RETURN_IF_ERROR(forward(f));
    RETURN_IF_ERROR(exchange(last_ ? nullptr : &mb_at(f).out, next,
                             last_ ? nullptr : &mb_at(b).dy, next));
    RETURN_IF_ERROR(backward(b));
    const bool more = k + 1 < remaining;
    RETURN_IF_ERROR(exchange(first_ ? nullptr : &mb_at(b).dx, prev,
                             first_ || !more ? nullptr : &mb_at(f + 1).x0,
                             prev));
  }
  for (int b = remaining; b < count; ++b) {
    RETURN_IF_ERROR(
        exchange(nullptr, -1, last_ ? nullptr : &mb_at(b).dy, next));
    RETURN_IF_ERROR(backward(b));
    RETURN_IF_ERROR(
        exchange(first_ ? nullptr : &mb_at(b).dx, prev, nullptr, -1));
  }
  double loss = loss_sum;
  RETURN_IF_ERROR(timed(&r.grad_reduce_s, [&]() -> Status {
    RETURN_IF_ERROR(ReduceGradients(dp_work));
    if (last_) RETURN_IF_ERROR(AllReduce(g_.dp, &loss, 1, DataType::kF64));
    if (o_.par.pp > 1) {
      return g_.pp->Broadcast(&loss, 1, DataType::kF64, o_.par.pp - 1)->Wait();
    }
    return absl::OkStatus();
  }));
  loss /= static_cast<double>(o_.global_batch) * o_.model.seq;
  bool finite = std::isfinite(loss);
  double norm = 0;
  RETURN_IF_ERROR(timed(&r.optimizer_s, [&]() -> Status {
    ASSIGN_OR_RETURN(norm, ClipAndUpdate(&finite));
    return absl::OkStatus();
  }));
  if (!finite) return HandleNonFinite(step_ + 1, loss, norm);
  ++step_;
  mutating_ = false;
  r.step = step_;
  r.loss = loss;
  r.grad_norm = norm;
  r.tokens = static_cast<int64_t>(o_.global_batch) * o_.model.seq;
  if (ckpt_ != nullptr && o_.ckpt_every > 0 && step_ % o_.ckpt_every == 0) {
    RETURN_IF_ERROR(timed(&r.checkpoint_s, [&] { return SaveCheckpoint(); }));
  }
  if (mem_ckpt_ != nullptr && step_ % o_.mem_every == 0) {
    double mem_s = 0;
    RETURN_IF_ERROR(timed(&mem_s, [&] { return SaveMemory(); }));
    r.checkpoint_s += mem_s;
  }
  r.seconds = std::chrono::duration<double>(SteadyClock::now() - t0).count();
  return r;
}

StatusOr<StepResult> Trainer::HandleNonFinite(int64_t step, double loss,
                                              double norm) {
  const bool values = std::isfinite(loss) && std::isfinite(norm);
  const std::string what = absl::StrCat(
      "step ", step, " is not finite: loss ", loss, ", gradient norm ", norm,
      values ? ", but an updated parameter is NaN or Inf (learning rate " : "",
      values ? absl::StrCat(o_.lr, " too high?)") : "");
  if (o_.on_nonfinite == TrainOptions::OnNonFinite::kStop) {
    return absl::FailedPreconditionError(absl::StrCat(
        what, "; stopping (--on-nonfinite=stop); nothing of it was saved"));
  }
  if (rollbacks_ >= o_.max_rollbacks) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, "; stopping after ", rollbacks_, " rollbacks (",
                     "--max-rollbacks ", o_.max_rollbacks, ")"));
  }
  ++rollbacks_;
  // The newest committed step must be the same on every rank: settle the
  // save in flight (rank 0's handle ends with the commit), then agree.
  RETURN_IF_ERROR(CheckLastSave());
  bool none = false;
  RETURN_IF_ERROR(AnyRank(&none));  // a barrier: rank 0 has committed
  auto latest = checkpoint::LatestStep(o_.ckpt_uri);
  if (absl::IsNotFound(latest.status())) {
    return absl::FailedPreconditionError(
        absl::StrCat(what, "; no committed checkpoint at ", o_.ckpt_uri,
                     " to roll back to"));
  }
  RETURN_IF_ERROR(latest.status());
  ASSIGN_OR_RETURN(int64_t resumed, Resume());
  GetLogger("TRAIN")->warn("{}; rolled back to step {} (rollback {} of {})",
                           what, resumed, rollbacks_, o_.max_rollbacks);
  StepResult r;
  r.step = resumed;
  r.loss = loss;
  r.grad_norm = norm;
  r.rolled_back_from = step;
  return r;
}

}  // namespace strata::train
