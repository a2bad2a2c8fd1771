#include "topology/probe/probe.h"

#include <cblas.h>
#include <dlfcn.h>
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/panel_gemm.h"
#include "topology/probe/gemm_curve.h"

extern "C" void openblas_set_num_threads(int);

namespace strata::probe {
namespace {

using Seconds = std::chrono::duration<double>;

std::string ReadSysfs(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  std::getline(in, s);
  return s;
}

// Best of 3 copies of 64 MiB into pre-touched memory, GB/s.
double MeasureCopyGbps() {
  constexpr size_t kBytes = 64 << 20;
  std::vector<char> src(kBytes, 1), dst(kBytes, 0);
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), kBytes);
    double s = Seconds(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, kBytes / s / 1e9);
  }
  return best;
}

// B operands cycled by MeasureSgemmGflops: twice this machine class's L3
// (32 MiB on the 2-core AMD EPYC VM), so each call's B comes from memory.
constexpr size_t kColdBytes = 64 << 20;

// Single-thread SGEMM rate of a d x d x d GEMM, GFLOP/s, with the kernel a
// CPU rank of strata-train runs on one thread: PanelGemm against panels
// packed once (common/panel_gemm.h; the trainer packs its weights once per
// step) where the CPU has AVX-512F, else OpenBLAS. In training the weight
// (B) is out of cache at every micro-batch's GEMM, so each call takes the
// next of enough copies of B to fill kColdBytes. Calls
// repeated for at least 2e8 FLOPs (~1-2 ms here), best of 3 such timings,
// so a short preemption on a shared machine does not count. Used as the
// "device" rate of CPU-only nodes. (A hand-written FMA loop measured 19
// GFLOP/s here where OpenBLAS reaches ~110, which made the planner's CPU
// predictions 2-5x slow; OpenBLAS 0.3.21, on an AMD family 26 CPU it does
// not know, runs its Haswell kernels at ~130 where the trainer's PanelGemm
// reached 200-250, and timing it made them 25-84% slow.)
double MeasureSgemmGflops(int d) {
  const bool panels = PanelGemmAvailable();
  const size_t floats = panels ? PanelFloats(d, d) : static_cast<size_t>(d) * d;
  const size_t copies =
      std::max<size_t>(1, kColdBytes / sizeof(float) / floats);
  std::vector<float> a(d * d, 0.5f), b(d * d, 0.25f), c(d * d, 0.0f);
  std::vector<float> pool(copies * floats);
  for (size_t i = 0; i < copies; ++i) {
    if (panels) {
      PackPanels(b.data(), d, false, d, d, pool.data() + i * floats);
    } else {
      std::copy(b.begin(), b.end(), pool.begin() + i * floats);
    }
  }
  const double flops = 2.0 * d * d * d;
  const int calls = std::max(1, static_cast<int>(2e8 / flops));
  double best = 0;
  size_t next = 0;  // the copy packed first: the longest out of cache
  for (int i = 0; i < 3; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    for (int j = 0; j < calls; ++j, next = (next + 1) % copies) {
      const float* bj = pool.data() + next * floats;
      if (panels) {
        PanelGemm(d, d, d, a.data(), d, bj, 0.0f, c.data(), d);
      } else {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d, d, d, 1.0f,
                    a.data(), d, bj, d, 0.0f, c.data(), d);
      }
    }
    double s = Seconds(std::chrono::steady_clock::now() - t0).count();
    if (s > 0) best = std::max(best, calls * flops / s / 1e9);
  }
  return best;
}

// cpu_gflops (512^3) and the size curve the planner's GEMM model uses
// (gemm_curve.h), fitted to cubes from 16 to 512: on this project's 2-core
// AMD EPYC VM OpenBLAS runs 16^3 at ~0.8 and 32^3-256^3 at 1.0-1.15 of its
// 512^3 rate, a half-dimension of 0.9-1.7 where GPUs have ~128 (measured
// 2026-11-26, docs/planner.md "Calibration").
void MeasureCpuGemm(control::NodeProbe* probe) {
  openblas_set_num_threads(1);
  std::vector<GemmRate> rates;
  for (int d : {16, 32, 64, 128, 256, 512}) {
    rates.push_back({d, MeasureSgemmGflops(d)});
  }
  probe->set_cpu_gflops(rates.back().gflops);
  auto curve = FitGemmCurve(rates);
  if (curve.ok()) {
    probe->set_gemm_half_dim(curve->half_dim);
    probe->set_gemm_peak_gflops(curve->peak_gflops);
  }
}

// One-way handoff between two threads through a mutex and a condition
// variable, seconds: `round_trips` round trips, best of `reps` such
// timings (a preemption on a shared machine lengthens one, not all). What
// one step of a collective or a pipeline send between CPU ranks waits for
// when the receiver sleeps (comm/inproc wakes receivers this way).
double MeasureHandoffSeconds(int round_trips, int reps) {
  std::mutex mu;
  std::condition_variable cv;
  int turn = 0;  // even: the main thread's, odd: the peer's
  std::thread peer([&] {
    for (int i = 0; i < reps * round_trips; ++i) {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait(lock, [&] { return turn % 2 == 1; });
      ++turn;
      cv.notify_one();
    }
  });
  double best = 0;
  for (int rep = 0; rep < reps; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < round_trips; ++i) {
      std::unique_lock<std::mutex> lock(mu);
      ++turn;
      cv.notify_one();
      cv.wait(lock, [&] { return turn % 2 == 0; });
    }
    double s = Seconds(std::chrono::steady_clock::now() - t0).count() /
               (2.0 * round_trips);
    if (rep == 0 || s < best) best = s;
  }
  peer.join();
  return best;
}

// The handoff while `cores` threads keep every core busy, as computing
// ranks do when they outnumber the cores: the woken thread waits for the
// scheduler to give it a core. 50 round trips (they take ~ms each).
double MeasureBusyHandoffSeconds(int cores) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> busy;
  for (int i = 0; i < cores; ++i) {
    busy.emplace_back([&stop] {
      volatile double x = 1;
      while (!stop.load(std::memory_order_relaxed)) x = x * 1.0000001;
    });
  }
  const double s = MeasureHandoffSeconds(50, 1);
  stop = true;
  for (std::thread& t : busy) t.join();
  return s;
}

// NVML through dlopen so the worker runs where the driver is absent.
void ProbeGpus(control::NodeProbe* probe) {
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    probe->set_gpu_probe("NVML not found (libnvidia-ml.so.1): no GPUs");
    return;
  }
  using InitFn = int (*)();
  using CountFn = int (*)(unsigned*);
  using HandleFn = int (*)(unsigned, void**);
  using NameFn = int (*)(void*, char*, unsigned);
  struct Memory {
    unsigned long long total, free, used;
  };
  using MemFn = int (*)(void*, Memory*);
  using LinkFn = int (*)(void*, unsigned, int*);
  auto init = reinterpret_cast<InitFn>(dlsym(lib, "nvmlInit_v2"));
  auto count = reinterpret_cast<CountFn>(dlsym(lib, "nvmlDeviceGetCount_v2"));
  auto handle =
      reinterpret_cast<HandleFn>(dlsym(lib, "nvmlDeviceGetHandleByIndex_v2"));
  auto name = reinterpret_cast<NameFn>(dlsym(lib, "nvmlDeviceGetName"));
  auto mem = reinterpret_cast<MemFn>(dlsym(lib, "nvmlDeviceGetMemoryInfo"));
  auto link = reinterpret_cast<LinkFn>(dlsym(lib, "nvmlDeviceGetNvLinkState"));
  unsigned n = 0;
  if (!init || !count || !handle || init() != 0 || count(&n) != 0) {
    probe->set_gpu_probe("NVML present but not usable: no GPUs");
    dlclose(lib);
    return;
  }
  for (unsigned i = 0; i < n; ++i) {
    void* dev = nullptr;
    if (handle(i, &dev) != 0) continue;
    control::GpuProbe* g = probe->add_gpu_details();
    char buf[96] = {0};
    if (name && name(dev, buf, sizeof(buf) - 1) == 0) g->set_name(buf);
    Memory m{};
    if (mem && mem(dev, &m) == 0) g->set_memory_bytes(m.total);
    // NVML_NVLINK_MAX_LINKS is 18 on Hopper.
    for (unsigned l = 0; link && l < 18; ++l) {
      int active = 0;
      if (link(dev, l, &active) == 0 && active)
        g->set_nvlinks(g->nvlinks() + 1);
    }
  }
  probe->set_gpus(probe->gpu_details_size());
  probe->set_gpu_probe(absl::StrCat("NVML: ", n, " GPUs"));
}

}  // namespace

StatusOr<control::NodeProbe> ProbeNode() {
  control::NodeProbe probe;
  char host[256] = {0};
  if (gethostname(host, sizeof(host) - 1) == 0) probe.set_hostname(host);

  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0 || hwloc_topology_load(topo) != 0) {
    return absl::InternalError("hwloc: failed to load the node topology");
  }
  probe.set_cpu_cores(
      std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE)));
  probe.set_numa_nodes(
      std::max(1, hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE)));
  hwloc_topology_destroy(topo);

  long pages = sysconf(_SC_PHYS_PAGES);
  long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_size > 0) {
    probe.set_memory_bytes(static_cast<int64_t>(pages) * page_size);
  }
  std::error_code ec;
  std::vector<std::string> nics;
  for (const auto& entry :
       std::filesystem::directory_iterator("/sys/class/net", ec)) {
    std::string name = entry.path().filename().string();
    if (name != "lo") nics.push_back(name);
  }
  std::sort(nics.begin(), nics.end());
  for (auto& n : nics) {
    probe.add_nics(n);
    control::NicProbe* d = probe.add_nic_details();
    d->set_name(n);
    const std::string base = "/sys/class/net/" + n;
    // speed: Mb/s, -1 or unreadable for virtual links.
    long mbps = std::atol(ReadSysfs(base + "/speed").c_str());
    if (mbps > 0) d->set_gbps(mbps / 1000.0);
    // type 32 = ARPHRD_INFINIBAND; RoCE cannot be told from sysfs alone.
    d->set_type(ReadSysfs(base + "/type") == "32" ? "ib" : "ethernet");
  }
  ProbeGpus(&probe);
  probe.set_copy_gbps(MeasureCopyGbps());
  MeasureCpuGemm(&probe);
  probe.set_handoff_latency_s(MeasureHandoffSeconds(500, 3));
  probe.set_busy_handoff_latency_s(
      MeasureBusyHandoffSeconds(probe.cpu_cores()));
  return probe;
}

}  // namespace strata::probe
