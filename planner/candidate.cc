#include "planner/candidate.h"

#include "absl/strings/str_cat.h"

namespace strata::planner {

std::string Candidate::ToString() const {
  return absl::StrCat(
      "tp=", tp, " pp=", pp, " dp=", dp, " cp=", cp,
      ep > 1 || etp > 1 ? absl::StrCat(" ep=", ep, " etp=", etp)
                        : std::string(),
      " vpp=", vpp, " mbs=", micro_batch, " zero=", zero_stage,
      distributed_optimizer ? " distopt=1" : "",
      " recompute=", Recompute::Mode_Name(recompute),
      sequence_parallel || tp == 1 ? "" : " sp=0",
      offload == Offload::none
          ? ""
          : absl::StrCat(" offload=", Offload::Kind_Name(offload)));
}

Plan SizesPlan(const Candidate& c) {
  Plan plan;
  plan.set_tp(c.tp);
  plan.set_pp(c.pp);
  plan.set_dp(c.dp);
  plan.set_cp(c.cp);
  plan.set_vpp(c.vpp);
  plan.set_ep(c.ep);
  plan.set_etp(c.etp);
  return plan;
}

}  // namespace strata::planner
