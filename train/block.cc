#include "train/block.h"

#include <algorithm>

#include "train/ops.h"
#include "train/workspace.h"

namespace strata::train {

Status TpAllReduce(comm::Backend* tp, float* buf, size_t count) {
  if (tp == nullptr || tp->size() == 1) return absl::OkStatus();
  comm::OpOptions opts;
  opts.synchronous = true;
  return tp
      ->AllReduce(buf, count, comm::DataType::kF32, comm::ReduceOp::kSum, opts)
      ->Wait();
}

Status BlockForward(StageParams& p, const WeightPanels* panels,
                    const LayerParams& l, const BlockDims& dm,
                    comm::Backend* tp, const float* x, BlockActs* a, float* y) {
  auto packed = [panels](int shard) {
    return panels != nullptr ? panels->Forward(shard) : nullptr;
  };
  const int t = dm.tokens(), h = dm.h, hl = dm.heads * dm.d, f = dm.f;
  const size_t th = static_cast<size_t>(t) * h;
  // resize() of buffers already at size keeps their storage: after the
  // first step nothing here allocates.
  a->x.resize(th);
  if (x != a->x.data()) std::copy_n(x, th, a->x.data());
  a->ln1.resize(th);
  a->mean1.resize(t);
  a->rstd1.resize(t);
  LayerNorm(a->x.data(), p.W(l.ln1_g), p.W(l.ln1_b), t, h, a->ln1.data(),
            a->mean1.data(), a->rstd1.data());
  for (auto [w, b, out] :
       {std::tuple{l.q_w, l.q_b, &a->q}, std::tuple{l.k_w, l.k_b, &a->k},
        std::tuple{l.v_w, l.v_b, &a->v}}) {
    out->resize(static_cast<size_t>(t) * hl);
    Linear(a->ln1.data(), p.W(w), p.W(b), t, h, hl, out->data(), packed(w));
  }
  a->probs.resize(static_cast<size_t>(dm.seqs) * dm.heads * dm.s * dm.s);
  a->att.resize(static_cast<size_t>(t) * hl);
  Attention(a->q.data(), a->k.data(), a->v.data(), dm.seqs, dm.s, dm.heads,
            dm.d, a->probs.data(), a->att.data());
  // Row-parallel output projection: partial sums, then g = all-reduce.
  a->x2.resize(th);
  Linear(a->att.data(), p.W(l.o_w), nullptr, t, hl, h, a->x2.data(),
         packed(l.o_w));
  RETURN_IF_ERROR(TpAllReduce(tp, a->x2.data(), th));
  AddResidual(a->x2.data(), a->x.data(), p.W(l.o_b), t, h);
  a->ln2.resize(th);
  a->mean2.resize(t);
  a->rstd2.resize(t);
  LayerNorm(a->x2.data(), p.W(l.ln2_g), p.W(l.ln2_b), t, h, a->ln2.data(),
            a->mean2.data(), a->rstd2.data());
  a->u.resize(static_cast<size_t>(t) * f);
  a->a.resize(a->u.size());
  Linear(a->ln2.data(), p.W(l.fc1_w), p.W(l.fc1_b), t, h, f, a->u.data(),
         packed(l.fc1_w));
  Gelu(a->u.data(), static_cast<int>(a->u.size()), a->a.data());
  Linear(a->a.data(), p.W(l.fc2_w), nullptr, t, f, h, y, packed(l.fc2_w));
  RETURN_IF_ERROR(TpAllReduce(tp, y, th));
  AddResidual(y, a->x2.data(), p.W(l.fc2_b), t, h);
  return absl::OkStatus();
}

Status BlockBackward(StageParams& p, const WeightPanels* panels,
                     const LayerParams& l, const BlockDims& dm,
                     comm::Backend* tp, const BlockActs& a, const float* dy,
                     float* dx) {
  auto packed = [panels](int shard) {
    return panels != nullptr ? panels->Backward(shard) : nullptr;
  };
  const int t = dm.tokens(), h = dm.h, hl = dm.heads * dm.d, f = dm.f;
  const size_t th = static_cast<size_t>(t) * h;
  const size_t tf = static_cast<size_t>(t) * f,
               thl = static_cast<size_t>(t) * hl;
  // Per-thread scratch (workspace.h): no allocation in the steady state.
  float* da = Scratch(Slot::kBlockDa, tf);
  float* du = Scratch(Slot::kBlockDu, tf);
  float* dln = Scratch(Slot::kBlockDln, th);
  float* dx2 = Scratch(Slot::kBlockDx2, th);
  // MLP: y = x2 + fc2(gelu(fc1(ln2(x2)))) + b2.
  AddColumnSums(dy, t, h, p.G(l.fc2_b));
  LinearBackward(a.a.data(), p.W(l.fc2_w), dy, t, f, h, da, p.G(l.fc2_w),
                 nullptr, false, packed(l.fc2_w));
  GeluBackward(a.u.data(), da, static_cast<int>(tf), du);
  LinearBackward(a.ln2.data(), p.W(l.fc1_w), du, t, h, f, dln, p.G(l.fc1_w),
                 p.G(l.fc1_b), false, packed(l.fc1_w));
  RETURN_IF_ERROR(TpAllReduce(tp, dln, th));  // f backward
  LayerNormBackward(a.x2.data(), p.W(l.ln2_g), a.mean2.data(), a.rstd2.data(),
                    dln, t, h, dx2, p.G(l.ln2_g), p.G(l.ln2_b));
  AddInto(dx2, dy, th);
  // Attention: x2 = x + o(attn(q, k, v of ln1(x))) + ob.
  AddColumnSums(dx2, t, h, p.G(l.o_b));
  float* datt = Scratch(Slot::kBlockDatt, thl);
  float* dq = Scratch(Slot::kBlockDq, thl);
  float* dk = Scratch(Slot::kBlockDk, thl);
  float* dv = Scratch(Slot::kBlockDv, thl);
  LinearBackward(a.att.data(), p.W(l.o_w), dx2, t, hl, h, datt, p.G(l.o_w),
                 nullptr, false, packed(l.o_w));
  AttentionBackward(a.q.data(), a.k.data(), a.v.data(), a.probs.data(), datt,
                    dm.seqs, dm.s, dm.heads, dm.d, dq, dk, dv);
  // dln = dq Wq^T + dk Wk^T + dv Wv^T, accumulated by the GEMMs.
  bool accumulate = false;
  for (auto [w, b, g] :
       {std::tuple{l.q_w, l.q_b, dq}, std::tuple{l.k_w, l.k_b, dk},
        std::tuple{l.v_w, l.v_b, dv}}) {
    LinearBackward(a.ln1.data(), p.W(w), g, t, h, hl, dln, p.G(w), p.G(b),
                   accumulate, packed(w));
    accumulate = true;
  }
  RETURN_IF_ERROR(TpAllReduce(tp, dln, th));  // f backward
  LayerNormBackward(a.x.data(), p.W(l.ln1_g), a.mean1.data(), a.rstd1.data(),
                    dln, t, h, dx, p.G(l.ln1_g), p.G(l.ln1_b));
  AddInto(dx, dx2, th);
  return absl::OkStatus();
}

}  // namespace strata::train
