#include "common/logging.h"

#include "common/mutex.h"
#include "spdlog/sinks/stdout_color_sinks.h"

namespace strata {
namespace {
// Also serializes creating loggers (spdlog::get then register).
Mutex g_mu;
spdlog::level::level_enum g_level ABSL_GUARDED_BY(g_mu) = spdlog::level::warn;
}  // namespace

Logger GetLogger(const std::string& module) {
  MutexLock lock(g_mu);
  if (Logger existing = spdlog::get(module)) return existing;
  Logger logger = spdlog::stderr_color_mt(module);
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ %n %v");
  logger->set_level(g_level);
  return logger;
}

bool SetLogLevel(const std::string& level) {
  spdlog::level::level_enum parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") return false;
  MutexLock lock(g_mu);
  g_level = parsed;
  spdlog::apply_all([parsed](Logger l) { l->set_level(parsed); });
  return true;
}

}  // namespace strata
