#include "fault/wavefront.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace strata::fault {

Wavefront ComputeWavefront(const std::vector<GroupProgress>& progress) {
  std::map<std::string, std::vector<const GroupProgress*>> by_group;
  for (const GroupProgress& p : progress) by_group[p.group].push_back(&p);

  Wavefront w;
  std::set<int> waiting_anywhere, missing_anywhere;
  for (const auto& [name, members] : by_group) {
    GroupWavefront g;
    g.group = name;
    for (const GroupProgress* p : members) {
      if (p->entered_seq > p->completed_seq && p->entered_seq > g.seq) {
        g.seq = p->entered_seq;
        g.op = p->op;
      }
    }
    if (g.seq < 0) continue;  // nobody is inside a collective of this group
    for (const GroupProgress* p : members) {
      if (p->entered_seq < g.seq && p->entered_seq > p->completed_seq) {
        g.behind.push_back(p->rank);
      } else if (p->entered_seq < g.seq) {
        g.missing.push_back(p->rank);
      } else if (p->completed_seq < g.seq) {
        g.waiting.push_back(p->rank);
      } else {
        g.done.push_back(p->rank);
      }
    }
    std::sort(g.done.begin(), g.done.end());
    std::sort(g.waiting.begin(), g.waiting.end());
    std::sort(g.missing.begin(), g.missing.end());
    std::sort(g.behind.begin(), g.behind.end());
    waiting_anywhere.insert(g.waiting.begin(), g.waiting.end());
    waiting_anywhere.insert(g.behind.begin(), g.behind.end());
    missing_anywhere.insert(g.missing.begin(), g.missing.end());
    w.groups.push_back(std::move(g));
  }
  for (int r : missing_anywhere) {
    if (!waiting_anywhere.contains(r)) w.culprits.push_back(r);
  }
  return w;
}

std::string DescribeWavefront(const Wavefront& w) {
  if (w.groups.empty()) return "no group is inside a collective";
  std::vector<std::string> parts;
  for (const GroupWavefront& g : w.groups) {
    std::string s = absl::StrCat("group ", g.group, " stuck in ", g.op, " #",
                                 g.seq, ": waiting ",
                                 absl::StrJoin(g.waiting, ","));
    if (!g.missing.empty()) {
      absl::StrAppend(&s, "; never entered ", absl::StrJoin(g.missing, ","));
    }
    if (!g.behind.empty()) {
      absl::StrAppend(&s, "; still inside an earlier one ",
                      absl::StrJoin(g.behind, ","));
    }
    if (!g.done.empty()) {
      absl::StrAppend(&s, "; finished by ", absl::StrJoin(g.done, ","));
    }
    if (g.missing.empty() && g.behind.empty() && g.done.empty()) {
      absl::StrAppend(&s, "; every member entered (data stopped moving)");
    }
    parts.push_back(std::move(s));
  }
  std::string out = absl::StrJoin(parts, "\n");
  if (!w.culprits.empty()) {
    absl::StrAppend(&out, "\nculprit ranks: ", absl::StrJoin(w.culprits, ","));
  }
  return out;
}

}  // namespace strata::fault
