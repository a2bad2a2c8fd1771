// `strata ckpt ls|inspect|verify|export|gc URI`: look after checkpoints.
// URI: file:///path, a plain path, or rocksdb:///path. Exit codes, the same
// for every subcommand: 2 for bad input — a URI that does not open, a
// missing step, corrupt or incomplete checkpoint data (NotFound, DataLoss,
// InvalidArgument, FailedPrecondition); 1 when the operation itself failed
// (e.g. the export file could not be written). The step a command reads is
// pinned (checkpoint/storage.h StepPin) so a trainer's retention cannot
// delete it meanwhile.
#include <unistd.h>

#include <algorithm>
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

// Bad input or bad data (2) versus a failed operation (1).
[[noreturn]] void Fail(const Status& st, const std::string& context = "") {
  const bool bad_input = absl::IsNotFound(st) || absl::IsDataLoss(st) ||
                         absl::IsInvalidArgument(st) ||
                         absl::IsFailedPrecondition(st);
  Fail(bad_input ? kExitBadInput : kExitFailed,
       context + std::string(st.message()));
}

// `step` opened and pinned; when < 0 the newest committed step (with
// `usable`: the newest that passes checkpoint::CheckStep, newer ones
// skipped with a warning — what export and a resume use; inspect and
// verify look at the newest as it is, to report its damage).
checkpoint::PinnedStep Open(const std::string& uri, int64_t step, bool usable) {
  if (step < 0 && !usable) {
    auto steps = checkpoint::ListSteps(uri);
    if (!steps.ok()) Fail(steps.status());
    if (steps->empty())
      Fail(kExitBadInput, "no committed checkpoint in " + uri);
    step = steps->back();
  }
  auto p = checkpoint::OpenStep(uri, step);
  if (!p.ok()) Fail(p.status());
  return std::move(*p);
}

void Ls(const std::string& uri) {
  const std::string& dir = uri;
  auto steps = checkpoint::ListSteps(dir);
  if (!steps.ok()) Fail(steps.status());
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

void Inspect(const std::string& uri, int64_t want) {
  checkpoint::PinnedStep p = Open(uri, want, /*usable=*/false);
  const int64_t step = p.step;
  auto m = checkpoint::ReadManifest(*p.storage, step);
  if (!m.ok()) Fail(m.status());
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

void Verify(const std::string& uri, int64_t want) {
  checkpoint::PinnedStep p = Open(uri, want, /*usable=*/false);
  const int64_t step = p.step;
  Status st = checkpoint::Verify(*p.storage, step);
  if (!st.ok()) Fail(st, absl::StrCat("step ", step, ": "));
  std::printf("step %lld: every chunk and blob checks out\n",
              static_cast<long long>(step));
}

void Export(const std::string& uri, int64_t want, const std::string& format,
            const std::string& out) {
  checkpoint::PinnedStep p = Open(uri, want, /*usable=*/true);
  const int64_t step = p.step;
  Status st = checkpoint::ExportSafetensors(*p.storage, step, out);
  if (!st.ok()) Fail(st, absl::StrCat("step ", step, ": "));
  std::printf("wrote %s (%s, step %lld)\n", out.c_str(), format.c_str(),
              static_cast<long long>(step));
}

// Keeps the `keep_last` newest steps that verify (checkpoint::Verify) and
// removes every other step older than the newest of them; steps newer than
// it (none verifies) are left alone and reported, as are steps a reader
// pins. Acts as rank 0: removes manifests (and for file:// whole steps; a
// rocksdb:// rank drops its data of uncommitted steps at its next save).
void Gc(const std::string& uri, int keep_last) {
  auto storage = checkpoint::OpenStorage(uri, 0, /*writable=*/true);
  if (!storage.ok()) Fail(storage.status());
  auto steps = (*storage)->Steps();
  if (!steps.ok()) Fail(steps.status());
  std::set<int64_t> keep;
  int64_t newest_kept = -1;
  for (auto it = steps->rbegin(); it != steps->rend(); ++it) {
    if (static_cast<int>(keep.size()) == keep_last) break;
    Status st = checkpoint::Verify(**storage, *it);
    if (st.ok()) {
      keep.insert(*it);
      newest_kept = std::max(newest_kept, *it);
      continue;
    }
    std::fprintf(stderr, "strata ckpt: step %lld does not verify: %s\n",
                 static_cast<long long>(*it),
                 std::string(st.message()).c_str());
  }
  if (keep.empty()) {
    Fail(kExitBadInput, "no step of " + uri + " verifies; nothing removed");
  }
  int removed = 0, kept = 0;
  for (int64_t s : *steps) {
    if (keep.count(s) || s > newest_kept) {
      if (s > newest_kept) {
        std::fprintf(stderr,
                     "strata ckpt: step %lld is newer than the newest "
                     "verifiable step; left in place\n",
                     static_cast<long long>(s));
      }
      ++kept;
      continue;
    }
    Status st = (*storage)->RemoveStep(s);
    if (absl::IsFailedPrecondition(st)) {
      std::fprintf(stderr, "strata ckpt: kept %s\n",
                   std::string(st.message()).c_str());
      ++kept;
      continue;
    }
    if (!st.ok()) Fail(kExitFailed, std::string(st.message()));
    ++removed;
  }
  std::printf("removed %d checkpoint(s), kept %d\n", removed, kept);
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
    c->add_option("URI", *uri, "file:///dir, dir or rocksdb:///dir")
        ->required();
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
      ckpt->add_subcommand("gc", "delete all but the newest steps that verify");
  add_uri(gc);
  gc->add_option("--keep", *keep, "steps to keep")->check(CLI::PositiveNumber);
  gc->callback([=] { Gc(*uri, *keep); });
}

}  // namespace strata::cli
