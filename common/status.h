// Status helpers shared by every module. Errors cross module boundaries as
// absl::Status / absl::StatusOr<T> with canonical codes (STYLE.md "Errors");
// the macros below propagate them without exceptions.
#pragma once

#include <sstream>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace strata {

using absl::Status;
using absl::StatusOr;

// Converts an errno value into a Status with the canonical code that tells
// the caller what to do, prefixed by `what` (e.g. "open /tmp/x").
Status ErrnoToStatus(int err, const std::string& what);

namespace internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* expr,
                              const std::string& detail);

template <typename A, typename B>
std::string CheckOpDetail(const A& a, const B& b) {
  std::ostringstream os;
  os << "(" << a << " vs. " << b << ")";
  return os.str();
}
}  // namespace internal

}  // namespace strata

#define STRATA_STATUS_CONCAT_INNER(a, b) a##b
#define STRATA_STATUS_CONCAT(a, b) STRATA_STATUS_CONCAT_INNER(a, b)

// Returns from the enclosing function if `expr` yields a non-OK Status.
#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    ::absl::Status strata_status_ = (expr);          \
    if (!strata_status_.ok()) return strata_status_; \
  } while (0)

// `ASSIGN_OR_RETURN(auto x, Foo())`: assigns the value of a StatusOr or
// returns its error from the enclosing function.
#define ASSIGN_OR_RETURN(lhs, expr)                                        \
  STRATA_ASSIGN_OR_RETURN_IMPL(STRATA_STATUS_CONCAT(strata_or_, __LINE__), \
                               lhs, expr)
#define STRATA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return std::move(tmp).status();     \
  lhs = std::move(tmp).value()

// Invariants: crash loudly with operand values. Never used for bad input.
#define STRATA_CHECK(cond)                                            \
  do {                                                                \
    if (!(cond))                                                      \
      ::strata::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)
#define STRATA_CHECK_OP(a, b, op)                                   \
  do {                                                              \
    const auto& strata_a_ = (a);                                    \
    const auto& strata_b_ = (b);                                    \
    if (!(strata_a_ op strata_b_))                                  \
      ::strata::internal::CheckFailed(                              \
          __FILE__, __LINE__, #a " " #op " " #b,                    \
          ::strata::internal::CheckOpDetail(strata_a_, strata_b_)); \
  } while (0)
#define STRATA_CHECK_EQ(a, b) STRATA_CHECK_OP(a, b, ==)
#define STRATA_CHECK_NE(a, b) STRATA_CHECK_OP(a, b, !=)
#define STRATA_CHECK_LT(a, b) STRATA_CHECK_OP(a, b, <)
#define STRATA_CHECK_LE(a, b) STRATA_CHECK_OP(a, b, <=)
#define STRATA_CHECK_GT(a, b) STRATA_CHECK_OP(a, b, >)
#define STRATA_CHECK_GE(a, b) STRATA_CHECK_OP(a, b, >=)
