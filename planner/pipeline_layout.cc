#include "planner/pipeline_layout.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "planner/model.h"

namespace strata::planner {
namespace {

// Unrolled layouts longer than this are refused: p x vpp x layers of the
// largest accepted model stays far below it.
constexpr size_t kMaxLayoutChars = 1 << 20;

Status Bad(const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("--fix layout: ", what));
}

// One pass of "(X)*n" -> X n times (X without parentheses), then one pass
// of "c*n" -> c n times, commas dropped: the expansion Megatron-core's
// PipelineParallelLayerLayout.parse_str_to_list does.
StatusOr<std::string> Unroll(const std::string& in) {
  auto repeat = [](size_t* i, const std::string& s, int* n) {
    // Reads "*digits" at s[*i]; false when absent.
    if (*i >= s.size() || s[*i] != '*') return false;
    size_t j = *i + 1;
    int64_t v = 0;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) {
      v = v * 10 + (s[j] - '0');
      if (v > static_cast<int64_t>(kMaxLayoutChars)) return false;
      ++j;
    }
    if (j == *i + 1) return false;
    *n = static_cast<int>(v);
    *i = j;
    return true;
  };
  std::string s;
  for (char ch : in) {
    if (ch != ',' && ch != ' ') s.push_back(ch);
  }
  std::string a;
  for (size_t i = 0; i < s.size();) {
    if (s[i] == '(') {
      const size_t close = s.find(')', i);
      if (close == std::string::npos) return Bad("unbalanced '('");
      const std::string body = s.substr(i + 1, close - i - 1);
      size_t k = close + 1;
      int n = 0;
      if (body.empty() || body.find('(') != std::string::npos ||
          !repeat(&k, s, &n)) {
        return Bad("expected (X)*n with X not empty and not nested");
      }
      if (a.size() + body.size() * n > kMaxLayoutChars) {
        return Bad("longer than 2^20 characters unrolled");
      }
      for (int r = 0; r < n; ++r) a += body;
      i = k;
    } else {
      a.push_back(s[i++]);
    }
  }
  std::string b;
  for (size_t i = 0; i < a.size();) {
    size_t k = i + 1;
    int n = 0;
    if (repeat(&k, a, &n)) {
      if (b.size() + n > kMaxLayoutChars) {
        return Bad("longer than 2^20 characters unrolled");
      }
      b.append(n, a[i]);
      i = k;
    } else {
      b.push_back(a[i++]);
    }
  }
  for (char ch : b) {
    if (ch != 'E' && ch != 'L' && ch != 't' && ch != 'm' && ch != '|') {
      return Bad(absl::StrCat("invalid layer character '", std::string(1, ch),
                              "' (known: E embedding, t transformer layer, m "
                              "multi-token prediction, L loss, | stage)"));
    }
  }
  return b;
}

// Layers per stage of a layout string, checked against Megatron-core's
// validate_layer_layout rules and strata's MTP placement.
StatusOr<std::vector<int>> FromLayout(const std::string& text,
                                      const ModelSpec& model, int p, int v) {
  ASSIGN_OR_RETURN(std::string s, Unroll(text));
  std::vector<std::string> parts = absl::StrSplit(s, '|');
  const int n = static_cast<int>(parts.size());
  if (n % p != 0) {
    return Bad(absl::StrCat(n, " virtual stages do not divide by pp ", p));
  }
  if (n / p != v) {
    return Bad(absl::StrCat(n, " virtual stages are vpp ", n / p,
                            " at pp ", p, ", not the pinned vpp ", v));
  }
  auto count = [&](char ch) {
    int c = 0;
    for (char x : s) c += x == ch;
    return c;
  };
  if (s.empty() || s.front() != 'E' || count('E') != 1) {
    return Bad("the embedding 'E' must come first, once");
  }
  if (s.back() != 'L' || count('L') != 1) {
    return Bad("the loss 'L' must come last, once");
  }
  if (count('t') != model.num_layers()) {
    return Bad(absl::StrCat(count('t'), " transformer layers 't' for the "
                            "model's num_layers ",
                            model.num_layers()));
  }
  if (count('m') != model.mtp_num_layers()) {
    return Bad(absl::StrCat(count('m'), " MTP layers 'm' for the model's "
                            "mtp_num_layers ",
                            model.mtp_num_layers()));
  }
  const size_t first_m = s.find('m');
  if (first_m != std::string::npos) {
    if (s.find('t', first_m) != std::string::npos) {
      return Bad("transformer layers must come before the MTP layers");
    }
    // Element index = vpp_rank * p + pp_rank (Megatron's flattening).
    if (parts[n - 1].find('m') == std::string::npos ||
        count('m') != static_cast<int>(std::count(
                          parts[n - 1].begin(), parts[n - 1].end(), 'm'))) {
      return Bad("strata runs the MTP layers on the last virtual stage of "
                 "the last pipeline stage, next to the loss");
    }
  }
  std::vector<int> layers(p, 0);
  for (int e = 0; e < n; ++e) {
    for (char ch : parts[e]) layers[e % p] += ch == 't';
  }
  return layers;
}

}  // namespace

StatusOr<int> LayoutVpp(const std::string& layout, int p) {
  ASSIGN_OR_RETURN(std::string s, Unroll(layout));
  const int n = static_cast<int>(std::count(s.begin(), s.end(), '|')) + 1;
  if (p <= 0 || n % p != 0) {
    return Bad(absl::StrCat(n, " virtual stages do not divide by pp ", p,
                            " (the layout holds pp x vpp stages)"));
  }
  return n / p;
}

StatusOr<std::vector<int>> PinnedStageLayers(const PlanConstraints& fix,
                                             const ModelSpec& model, int p,
                                             int v) {
  const int l = model.num_layers();
  const bool first_last =
      fix.has_first_stage_layers() || fix.has_last_stage_layers();
  const bool account = fix.account_for_embedding() || fix.account_for_loss();
  const bool layout = fix.has_pipeline_layout();
  if (int(first_last) + int(account) + int(layout) > 1) {
    return absl::InvalidArgumentError(
        "--fix: first/last, embedding_stage/loss_stage and layout are "
        "three ways to pin the split; give one (Megatron-core refuses the "
        "combination too)");
  }
  if (layout) return FromLayout(fix.pipeline_layout(), model, p, v);
  if (!first_last && !account) return std::vector<int>{};
  if (p < 2) {
    return absl::InvalidArgumentError(
        "--fix first/last/embedding_stage/loss_stage need pp >= 2");
  }
  std::vector<int> layers(p, 0);
  if (account) {
    // The embedding and the loss count as a layer each of the split.
    const int e = fix.account_for_embedding() ? 1 : 0;
    const int lo = fix.account_for_loss() ? 1 : 0;
    const int total = l + e + lo;
    if (total % p != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fix embedding_stage/loss_stage: num_layers ", l, " + ", e + lo,
          " = ", total, " must divide by pp ", p,
          " (account_for_*_in_pipeline_split)"));
    }
    const int per = total / p;
    if (per % v != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fix embedding_stage/loss_stage: ", per,
          " layers per stage must divide by vpp ", v));
    }
    for (int i = 0; i < p; ++i) layers[i] = per;
    layers[0] -= e;
    layers[p - 1] -= lo;
  } else {
    int rest = l, middle = p;
    auto edge = [&](bool has, int n, const char* which, int* at) -> Status {
      if (!has) return absl::OkStatus();
      if (n <= 0 || n % v != 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--fix ", which, "=", n, ": must be above 0 and divide by vpp ",
            v, " (Megatron-core num_layers_in_", which, "_pipeline_stage)"));
      }
      *at = n;
      rest -= n;
      --middle;
      return absl::OkStatus();
    };
    RETURN_IF_ERROR(edge(fix.has_first_stage_layers(),
                         fix.first_stage_layers(), "first", &layers[0]));
    RETURN_IF_ERROR(edge(fix.has_last_stage_layers(), fix.last_stage_layers(),
                         "last", &layers[p - 1]));
    if (rest < 0 || (rest > 0) != (middle > 0) ||
        (middle > 0 && rest % (middle * v) != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--fix first/last: the other ", middle, " stages hold ", rest,
          " layers, which must divide by ", middle, " stages x vpp ", v));
    }
    for (int i = 0; i < p; ++i) {
      const bool pinned = (i == 0 && fix.has_first_stage_layers()) ||
                          (i == p - 1 && fix.has_last_stage_layers());
      if (!pinned) layers[i] = rest / middle;
    }
  }
  return layers;
}

std::string LayoutString(const std::vector<int>& layers, int v, int mtp) {
  const int p = static_cast<int>(layers.size());
  // chunks[j][i]: the part of pp rank i at vpp rank j.
  std::vector<std::vector<std::string>> chunks(v, std::vector<std::string>(p));
  for (int i = 0; i < p; ++i) {
    const int base = layers[i] / v, extra = layers[i] % v;
    for (int j = 0; j < v; ++j) {
      // The first stage's extra layers go to its later chunks, the others'
      // to their earlier ones.
      const bool more = i == 0 ? j >= v - extra : j < extra;
      chunks[j][i] = std::string(base + (more ? 1 : 0), 't');
    }
  }
  chunks[0][0] = "E" + chunks[0][0];
  chunks[v - 1][p - 1] += std::string(mtp, 'm') + "L";
  std::vector<std::string> flat;
  for (int j = 0; j < v; ++j)
    for (int i = 0; i < p; ++i) flat.push_back(chunks[j][i]);
  // Runs of equal parts as "(part|)*n"; the last part closes the string.
  std::string out;
  const size_t n = flat.size();
  for (size_t i = 0; i + 1 < n;) {
    size_t j = i;
    while (j + 1 < n - 1 && flat[j + 1] == flat[i]) ++j;
    const size_t run = j - i + 1;
    if (run >= 2) {
      absl::StrAppend(&out, "(", flat[i], "|)*", run);
    } else {
      absl::StrAppend(&out, flat[i], "|");
    }
    i = j + 1;
  }
  out += flat[n - 1];
  return out;
}

}  // namespace strata::planner
