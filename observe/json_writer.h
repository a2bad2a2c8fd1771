// Minimal JSON output helpers for the writers in observe/ (the trace). Only
// what they need: string escaping per RFC 8259 and number formatting that
// never prints NaN or Infinity (not JSON).
#pragma once

#include <string>

namespace strata::observe {

// `s` as a JSON string literal, quotes included; control characters as
// \u00XX, invalid UTF-8 bytes replaced by U+FFFD.
std::string JsonString(const std::string& s);

// `v` with up to `decimals` fraction digits; non-finite values become 0.
std::string JsonNumber(double v, int decimals = 3);

}  // namespace strata::observe
