// splitmix64 (Steele, Lea & Flood 2014): a counter-based mixer, so a value
// keyed by (seed, index) is the same whichever rank computes it. Used for
// the trainer's initialisation and data.
#pragma once

#include <cstdint>

namespace strata::train {

inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace strata::train
