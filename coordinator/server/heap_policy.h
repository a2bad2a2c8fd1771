// How the coordinator's process uses glibc's malloc: one arena and fixed
// trim and mmap thresholds, so memory that RocksDB's background threads and
// the retention sweep free goes back to the system instead of staying in
// the heap (docs/control-plane.md "Memory over many jobs").
//
// Measured with job_memory_test (2,000 short jobs, docs/results.md
// "Coordinator memory over many jobs"): with glibc's defaults the process
// grew ~1,100 bytes per job while its live allocations grew ~130; the
// rest was free memory kept by malloc: ~1 MB in a second arena used by a
// RocksDB background thread (compaction buffers, freed but not trimmed)
// and free chunks in the main heap, kept because glibc raises its trim
// threshold to twice the largest mmapped block freed so far (mallopt(3),
// M_MMAP_THRESHOLD "dynamic"), and one arena per thread that allocates
// concurrently (M_ARENA_MAX default 8 x cores).
#pragma once

namespace strata::coordinator {

// Call first in main(), before any thread starts (an arena made before the
// limit stays). M_ARENA_MAX 1, M_MMAP_THRESHOLD and M_TRIM_THRESHOLD 128
// KiB (glibc's initial values, now fixed). No effect with another malloc.
void ConfigureHeap();

// Returns free heap memory to the system (malloc_trim(3)): called after the
// retention sweep drops jobs from memory.
void ReleaseFreeHeap();

}  // namespace strata::coordinator
