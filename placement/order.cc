#include "placement/order.h"

namespace strata::placement {

Coord CoordOf(const Sizes& s, int64_t rank) {
  Coord c;
  c.tp = static_cast<int>(rank % s.tp);
  rank /= s.tp;
  c.cp = static_cast<int>(rank % s.cp);
  rank /= s.cp;
  c.dp = static_cast<int>(rank % s.dp);
  c.pp = static_cast<int>(rank / s.dp);
  return c;
}

int64_t RankOf(const Sizes& s, const Coord& c) {
  return c.tp + static_cast<int64_t>(s.tp) *
                    (c.cp + static_cast<int64_t>(s.cp) *
                                (c.dp + static_cast<int64_t>(s.dp) * c.pp));
}

int DataParallelSize(int64_t world, int tp, int pp, int cp) {
  if (tp < 1 || pp < 1 || cp < 1 || world < 1) return 0;
  const int64_t model = static_cast<int64_t>(tp) * pp * cp;
  return world % model == 0 ? static_cast<int>(world / model) : 0;
}

void AddGroups(const Sizes& s, Placement* pl) {
  // One kind: iterate over the other three coordinates, vary this one
  // (`Coord::*vary`) across the group's members.
  auto add_kind = [&](const char* kind, int Coord::*vary, int size) {
    Coord fixed;
    int index = 0;
    for (fixed.pp = 0; fixed.pp < (vary == &Coord::pp ? 1 : s.pp); ++fixed.pp)
      for (fixed.dp = 0; fixed.dp < (vary == &Coord::dp ? 1 : s.dp);
           ++fixed.dp)
        for (fixed.cp = 0; fixed.cp < (vary == &Coord::cp ? 1 : s.cp);
             ++fixed.cp)
          for (fixed.tp = 0; fixed.tp < (vary == &Coord::tp ? 1 : s.tp);
               ++fixed.tp) {
            Group* g = pl->add_groups();
            g->set_kind(kind);
            g->set_index(index++);
            Coord member = fixed;
            for (int i = 0; i < size; ++i) {
              member.*vary = i;
              g->add_ranks(static_cast<int>(RankOf(s, member)));
            }
          }
  };
  add_kind("tp", &Coord::tp, s.tp);
  add_kind("cp", &Coord::cp, s.cp);
  add_kind("dp", &Coord::dp, s.dp);
  add_kind("pp", &Coord::pp, s.pp);
}

}  // namespace strata::placement
