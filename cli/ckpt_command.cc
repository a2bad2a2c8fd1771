// `strata ckpt ls|inspect|verify|export|gc URI`: look after checkpoints.
// URI: file:///path, a plain path, or rocksdb:///path.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/checkpointer.h"
#include "checkpoint/reader.h"
#include "checkpoint/safetensors.h"
#include "cli/commands.h"

namespace strata::cli {
namespace {

[[noreturn]] void Fail(int code, const std::string& message) {
  std::fprintf(stderr, "strata ckpt: %s\n", message.c_str());
  throw CLI::RuntimeError(code);
}

int64_t StepOrLatest(const std::string& dir, int64_t step) {
  if (step >= 0) return step;
  auto latest = checkpoint::LatestStep(dir);
  if (!latest.ok()) Fail(kExitFailed, std::string(latest.status().message()));
  return *latest;
}

void Ls(const std::string& uri) {
  const std::string& dir = uri;
  auto steps = checkpoint::ListSteps(dir);
  if (!steps.ok()) Fail(kExitBadInput, std::string(steps.status().message()));
  std::printf("%12s %8s %8s %14s\n", "step", "ranks", "tensors", "bytes");
  for (int64_t s : *steps) {
    auto m = checkpoint::ReadManifest(dir, s);
    if (!m.ok()) {
      std::printf("%12lld  unreadable: %s\n", static_cast<long long>(s),
                  std::string(m.status().message()).c_str());
      continue;
    }
    uint64_t bytes = 0;
    for (const auto& t : m->tensors())
      for (const auto& c : t.chunks()) bytes += c.length();
    std::printf("%12lld %8d %8d %14llu\n", static_cast<long long>(s),
                m->world_size(), m->tensors_size(),
                static_cast<unsigned long long>(bytes));
  }
}

void Inspect(const std::string& uri, int64_t step) {
  const std::string& dir = uri;
  step = StepOrLatest(dir, step);
  auto m = checkpoint::ReadManifest(dir, step);
  if (!m.ok()) Fail(kExitFailed, std::string(m.status().message()));
  std::printf("step %lld, written by %d ranks\n", static_cast<long long>(step),
              m->world_size());
  std::printf("%-40s %-5s %-20s %12s %7s  %s\n", "tensor", "dtype", "shape",
              "bytes", "chunks", "sharding (chunk shapes x count)");
  for (const auto& t : m->tensors()) {
    uint64_t bytes = 0;
    std::map<std::string, int> shapes;
    for (const auto& c : t.chunks()) {
      bytes += c.length();
      ++shapes["[" + absl::StrJoin(c.shape(), ",") + "]"];
    }
    std::vector<std::string> parts;
    for (const auto& [s, n] : shapes) parts.push_back(absl::StrCat(s, " x", n));
    std::printf("%-40s %-5s %-20s %12llu %7d  %s\n", t.name().c_str(),
                t.dtype().c_str(),
                ("[" + absl::StrJoin(t.global_shape(), ",") + "]").c_str(),
                static_cast<unsigned long long>(bytes), t.chunks_size(),
                absl::StrJoin(parts, ", ").c_str());
  }
  for (const auto& b : m->blobs()) {
    std::printf("blob %-35s %llu bytes\n", b.name().c_str(),
                static_cast<unsigned long long>(b.length()));
  }
}

void Verify(const std::string& uri, int64_t step) {
  const std::string& dir = uri;
  step = StepOrLatest(dir, step);
  Status st = checkpoint::Verify(dir, step);
  if (!st.ok())
    Fail(kExitFailed, absl::StrCat("step ", step, ": ", st.message()));
  std::printf("step %lld: every chunk and blob checks out\n",
              static_cast<long long>(step));
}

void Export(const std::string& uri, int64_t step, const std::string& format,
            const std::string& out) {
  const std::string& dir = uri;
  step = StepOrLatest(dir, step);
  Status st = checkpoint::ExportSafetensors(dir, step, out);
  if (!st.ok()) Fail(kExitFailed, std::string(st.message()));
  std::printf("wrote %s (%s, step %lld)\n", out.c_str(), format.c_str(),
              static_cast<long long>(step));
}

void Gc(const std::string& uri, int keep_last) {
  // Acts as rank 0: removes old manifests (and for file:// whole steps; a
  // rocksdb:// rank drops its data of uncommitted steps at its next save).
  auto storage = checkpoint::OpenStorage(uri, 0, /*writable=*/true);
  if (!storage.ok())
    Fail(kExitBadInput, std::string(storage.status().message()));
  auto steps = (*storage)->Steps();
  if (!steps.ok()) Fail(kExitBadInput, std::string(steps.status().message()));
  int removed = 0;
  for (size_t i = 0; i + keep_last < steps->size(); ++i) {
    Status st = (*storage)->RemoveStep((*steps)[i]);
    if (!st.ok()) Fail(kExitFailed, std::string(st.message()));
    ++removed;
  }
  std::printf("removed %d checkpoint(s), kept %zu\n", removed,
              steps->size() - static_cast<size_t>(removed));
}

}  // namespace

void AddCkptCommand(CLI::App* app) {
  CLI::App* ckpt = app->add_subcommand(
      "ckpt", "List, inspect, verify and export checkpoints");
  ckpt->require_subcommand(1);
  auto uri = std::make_shared<std::string>();
  auto step = std::make_shared<int64_t>(-1);
  auto out = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("safetensors");
  auto keep = std::make_shared<int>(1);
  auto add_uri = [&](CLI::App* c) {
    c->add_option("URI", *uri, "file:///dir or dir")->required();
  };
  CLI::App* ls = ckpt->add_subcommand("ls", "committed steps");
  add_uri(ls);
  ls->callback([=] { Ls(*uri); });
  CLI::App* inspect =
      ckpt->add_subcommand("inspect", "tensors, shapes, dtypes, sharding");
  add_uri(inspect);
  inspect->add_option("--step", *step, "default: latest");
  inspect->callback([=] { Inspect(*uri, *step); });
  CLI::App* verify =
      ckpt->add_subcommand("verify", "re-read and check every chunk");
  add_uri(verify);
  verify->add_option("--step", *step, "default: latest");
  verify->callback([=] { Verify(*uri, *step); });
  CLI::App* exp =
      ckpt->add_subcommand("export", "consolidate into one safetensors file");
  add_uri(exp);
  exp->add_option("--step", *step, "default: latest");
  exp->add_option("--format", *format)->check(CLI::IsMember({"safetensors"}));
  exp->add_option("--out", *out, "output file")->required();
  exp->callback([=] { Export(*uri, *step, *format, *out); });
  CLI::App* gc =
      ckpt->add_subcommand("gc", "delete all but the newest committed steps");
  add_uri(gc);
  gc->add_option("--keep", *keep, "steps to keep")->check(CLI::PositiveNumber);
  gc->callback([=] { Gc(*uri, *keep); });
}

}  // namespace strata::cli
