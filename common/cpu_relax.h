// CpuRelax: the spin-wait hint of the CPU (x86 PAUSE, Arm YIELD), for
// loops that poll memory another core writes: it lets that core's writes
// and a hyperthread sibling through, and saves power. A no-op elsewhere.
#pragma once

namespace strata {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

}  // namespace strata
