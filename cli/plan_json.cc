#include "cli/plan_json.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/config.h"

namespace strata::cli {
namespace {

// The strings a placement holds are kinds, NIC types and the order
// ("tp", "ib", "tp-cp-dp-pp"); escaped all the same.
void AppendString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char ch : s) {
    if (ch == '"' || ch == '\\') {
      out->push_back('\\');
      out->push_back(ch);
    } else if (static_cast<unsigned char>(ch) < 0x20) {
      absl::StrAppend(out, "\\u00", ch < 0x10 ? "0" : "",
                      absl::Hex(static_cast<unsigned char>(ch)));
    } else {
      out->push_back(ch);
    }
  }
  out->push_back('"');
}

template <typename Ints>
void AppendInts(const Ints& v, std::string* out) {
  out->push_back('[');
  bool first = true;
  for (int x : v) {
    if (!first) out->push_back(',');
    first = false;
    absl::StrAppend(out, x);
  }
  out->push_back(']');
}

// Flushes `buf` to `out` once it holds more than a chunk.
void Flush(std::string* buf, std::FILE* out, bool force) {
  if (!force && buf->size() < (1 << 16)) return;
  std::fwrite(buf->data(), 1, buf->size(), out);
  buf->clear();
}

void WritePlacement(const Placement& pl, std::FILE* out) {
  std::string b = "{\"order\":";
  AppendString(pl.order(), &b);
  b += ",\"ranks\":[";
  for (int i = 0; i < pl.ranks_size(); ++i) {
    const RankPlacement& r = pl.ranks(i);
    absl::StrAppend(&b, i ? "," : "", "{\"rank\":", r.rank(),
                    ",\"node\":", r.node(), ",\"local_gpu\":", r.local_gpu(),
                    ",\"tp_rank\":", r.tp_rank(), ",\"cp_rank\":", r.cp_rank(),
                    ",\"dp_rank\":", r.dp_rank(), ",\"pp_rank\":", r.pp_rank(),
                    "}");
    Flush(&b, out, false);
  }
  b += "],\"groups\":[";
  for (int i = 0; i < pl.groups_size(); ++i) {
    const Group& g = pl.groups(i);
    absl::StrAppend(&b, i ? "," : "", "{\"kind\":");
    AppendString(g.kind(), &b);
    absl::StrAppend(&b, ",\"index\":", g.index(), ",\"ranks\":");
    AppendInts(g.ranks(), &b);
    b += ",\"nic_type\":";
    AppendString(g.nic_type(), &b);
    b += "}";
    Flush(&b, out, false);
  }
  b += "],\"stages\":[";
  for (int i = 0; i < pl.stages_size(); ++i) {
    const StageInfo& s = pl.stages(i);
    absl::StrAppend(&b, i ? "," : "", "{\"pp_rank\":", s.pp_rank(),
                    ",\"num_layers\":", s.num_layers(), ",\"nic_type\":");
    AppendString(s.nic_type(), &b);
    b += ",\"nodes\":";
    AppendInts(s.nodes(), &b);
    b += "}";
    Flush(&b, out, false);
  }
  b += "]}";
  Flush(&b, out, true);
}

}  // namespace

void WritePlanJson(PlanReport* report, std::FILE* out) {
  Placement placement;
  if (report->plans_size() > 0 && report->plans(0).has_placement()) {
    placement.Swap(report->mutable_plans(0)->mutable_placement());
    report->mutable_plans(0)->clear_placement();
  }
  const std::string text = MessageToJson(*report, /*pretty=*/false);
  const std::string anchor = "\"plans\":[{";
  const size_t at = text.find(anchor);
  if (placement.ranks_size() == 0 || at == std::string::npos) {
    std::fwrite(text.data(), 1, text.size(), out);
    std::fputc('\n', out);
    return;
  }
  // The placement spliced in as the best plan's first field.
  const size_t split = at + anchor.size();
  std::fwrite(text.data(), 1, split, out);
  std::fputs("\"placement\":", out);
  WritePlacement(placement, out);
  if (text[split] != '}') std::fputc(',', out);
  std::fwrite(text.data() + split, 1, text.size() - split, out);
  std::fputc('\n', out);
}

}  // namespace strata::cli
