#include "fault/window.h"

#include <algorithm>

namespace strata::fault {

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double upper = v[mid];
  if (v.size() % 2 == 1) return upper;
  double lower = *std::max_element(v.begin(), v.begin() + mid);
  return (lower + upper) / 2;
}

double Window::Median() const {
  return fault::Median(std::vector<double>(values_.begin(), values_.end()));
}

double Window::Max() const {
  return values_.empty() ? 0 : *std::max_element(values_.begin(), values_.end());
}

}  // namespace strata::fault
