// The C++ API of libstrata for rank programs: a header-only wrapper over the
// C API (c_api.h), so a program built against one libstrata.so.0 keeps
// working with the next compatible one (the C ABI is the only contract; no
// C++ type crosses the library boundary).
//
// Errors throw strata::Error carrying the absl::StatusCode value and the
// library's message. Not thread-safe: a Runtime and its Checkpointers are
// used from one thread (c_api.h).
//
//   strata::Runtime rt;                     // placement from the environment
//   const strata_placement& p = rt.placement();
//   rt.EndStep(step, tokens, loss);         // step telemetry to the worker
#ifndef STRATA_STRATA_HPP_
#define STRATA_STRATA_HPP_

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "strata/c_api.h"

namespace strata {

class Error : public std::runtime_error {
 public:
  Error(int code, const std::string& what)
      : std::runtime_error("strata error " + std::to_string(code) + ": " +
                           what),
        code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

// Throws Error for a non-zero C API result.
inline void Check(int rc) {
  if (rc != STRATA_OK) throw Error(rc, strata_last_error());
}

class Checkpointer;

// The rank's runtime (strata_init). build_groups = false: placement, store
// and telemetry only, for ranks that communicate with another library.
class Runtime {
 public:
  explicit Runtime(bool build_groups = false) {
    Check(strata_init(build_groups ? 1 : 0, &rt_));
    Check(strata_get_placement(rt_, &placement_));
  }
  ~Runtime() { strata_finalize(rt_); }
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const strata_placement& placement() const { return placement_; }
  std::string job_id() const { return strata_job_id(rt_); }
  std::string ckpt_uri() const { return strata_ckpt_uri(rt_); }

  void AddTime(const char* section, double seconds) {
    Check(strata_timer_add(rt_, section, seconds));
  }
  void EndStep(int64_t step, int64_t tokens, double loss) {
    Check(strata_timer_end_step(rt_, step, tokens, loss));
  }
  void SetTotalSteps(int64_t total) {
    Check(strata_timer_set_total_steps(rt_, total));
  }
  strata_runtime* get() { return rt_; }

 private:
  strata_runtime* rt_ = nullptr;
  strata_placement placement_{};
};

// Asynchronous checkpoints across every rank of the job (strata_ckpt_open);
// the destructor waits for the last save.
class Checkpointer {
 public:
  explicit Checkpointer(Runtime& rt, const std::string& uri = "",
                        int keep_last = 3) {
    Check(strata_ckpt_open(rt.get(), uri.c_str(), keep_last, &ck_));
  }
  ~Checkpointer() { strata_ckpt_close(ck_); }
  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;

  void Save(int64_t step, const std::vector<strata_tensor>& tensors,
            const std::vector<strata_blob>& blobs = {}) {
    Check(strata_ckpt_save(ck_, step, tensors.data(),
                           static_cast<int>(tensors.size()), blobs.data(),
                           static_cast<int>(blobs.size())));
  }
  void Wait() { Check(strata_ckpt_wait(ck_)); }

 private:
  strata_checkpointer* ck_ = nullptr;
};

// The newest committed step under `uri`, or -1 when none.
inline int64_t LatestStep(const std::string& uri) {
  int64_t step = -1;
  Check(strata_ckpt_latest(uri.c_str(), &step));
  return step;
}

}  // namespace strata

#endif  // STRATA_STRATA_HPP_
