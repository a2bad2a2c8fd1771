// One injected storage fault, end to end, for ckpt_failio_test.sh (run under
// the failio LD_PRELOAD shim, tests/fault/failio/failio.h, whose trigger
// file this program creates and removes):
//   ckpt_fault_driver URI TRIGGER EXPECT
// saves step 1; with the fault on saves step 2, which must fail with a
// Status naming "checkpoint step 2", `EXPECT` (the failing file or
// instance) and, for ENOSPC, the free space; checks step 1 still verifies
// and a resume would load a step that verifies; with the fault off saves
// step 3, which must succeed and verify; finally the catalog must hold
// exactly the storage's committed steps, latest 3. Exit 0 when all hold;
// otherwise prints what failed and exits 1.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "checkpoint/catalog.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"

namespace strata::checkpoint {
namespace {

int failures = 0;

void Check(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL: %s\n", what.c_str());
    ++failures;
  }
}

Status Save(Checkpointer& ckpt, int64_t step) {
  std::vector<float> w(300000, static_cast<float>(step));  // 1.2 MB
  ShardedTensor t{"w", DType::kF32, {300000}, {300000}, {0}, 0, 1, w.data()};
  ASSIGN_OR_RETURN(SaveHandle h,
                   ckpt.SaveAsync(step, {t}, {Blob{"step", false, "s"}}));
  return h.Wait();
}

int Run(const std::string& uri, const std::string& trigger,
        const std::string& expect) {
  CheckpointOptions o;
  o.uri = uri;
  o.store = comm::NewInMemoryStore();
  o.default_catalog = true;
  o.job = "j";
  o.keep_last = 3;
  {
    Checkpointer ckpt(o);
    Status st = Save(ckpt, 1);
    Check(st.ok(), "step 1 before the fault: " + st.ToString());
    close(open(trigger.c_str(), O_CREAT | O_WRONLY, 0644));
    st = Save(ckpt, 2);
    Check(!st.ok(), "step 2 under the fault succeeded (fault not hit)");
    const std::string msg(st.message());
    Check(msg.find("checkpoint step 2 at " + uri) != std::string::npos &&
              msg.find(expect) != std::string::npos,
          "step 2's error names neither the step nor " + expect + ": " + msg);
    Check(!absl::IsResourceExhausted(st) ||
              msg.find("MiB free of") != std::string::npos,
          "ENOSPC without the free space: " + msg);
    Check(!ckpt.Poll().ok(), "Poll did not report the failed save");
    Check(ckpt.consecutive_failures() == 1, "consecutive_failures != 1");
    st = Verify(uri, 1);
    Check(st.ok(), "step 1 after the fault: " + st.ToString());
    auto latest = LatestStep(uri);
    Check(latest.ok() && Verify(uri, *latest).ok(),
          "the step a resume picks does not verify");
    unlink(trigger.c_str());
    st = Save(ckpt, 3);
    Check(st.ok(), "step 3 after the fault: " + st.ToString());
    Check(ckpt.consecutive_failures() == 0, "consecutive_failures != 0");
  }
  Status st = Verify(uri, 3);
  Check(st.ok(), "step 3 does not verify: " + st.ToString());
  auto steps = ListSteps(uri);
  auto catalog = Catalog::Open(DefaultCatalogPath(uri));
  Check(catalog.ok(), "catalog does not open: " + catalog.status().ToString());
  if (catalog.ok() && steps.ok()) {
    auto recorded = (*catalog)->Steps("j");
    auto latest = (*catalog)->Latest("j");
    Check(recorded.ok() && *recorded == *steps,
          "catalog steps [" +
              (recorded.ok() ? absl::StrJoin(*recorded, ",") : "error") +
              "] != storage steps [" + absl::StrJoin(*steps, ",") + "]");
    Check(latest.ok() && *latest == 3, "catalog latest is not 3");
  }
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace strata::checkpoint

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s URI TRIGGER EXPECT\n", argv[0]);
    return 2;
  }
  return strata::checkpoint::Run(argv[1], argv[2], argv[3]);
}
