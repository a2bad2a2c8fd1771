// A bounded window of recent samples and its median: the robust statistic
// every detector compares (a single slow step, a GC pause or a checkpoint,
// moves a median over a window far less than a mean).
#pragma once

#include <cstddef>
#include <deque>
#include <vector>

namespace strata::fault {

class Window {
 public:
  // REQUIRES: capacity >= 1.
  explicit Window(size_t capacity) : capacity_(capacity) {}

  void Add(double v) {
    values_.push_back(v);
    if (values_.size() > capacity_) values_.pop_front();
  }
  size_t size() const { return values_.size(); }
  bool full() const { return values_.size() == capacity_; }
  // Median of the samples held (mean of the two middle ones for an even
  // count); 0 when empty.
  double Median() const;
  // Largest sample held; 0 when empty.
  double Max() const;

 private:
  size_t capacity_;
  std::deque<double> values_;
};

// Median of `v` (mean of the two middle values for an even count); 0 when
// empty. Takes a copy because it reorders.
double Median(std::vector<double> v);

}  // namespace strata::fault
