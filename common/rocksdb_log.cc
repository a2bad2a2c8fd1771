#include "common/rocksdb_log.h"

#include <cstdarg>
#include <cstdio>

namespace strata {
namespace {

class SpdlogRocksDbLog : public rocksdb::Logger {
 public:
  explicit SpdlogRocksDbLog(strata::Logger logger)
      : rocksdb::Logger(rocksdb::InfoLogLevel::DEBUG_LEVEL),
        logger_(std::move(logger)) {}

  using rocksdb::Logger::Logv;
  void Logv(const char* format, va_list ap) override {
    Logv(rocksdb::InfoLogLevel::INFO_LEVEL, format, ap);
  }

  void Logv(const rocksdb::InfoLogLevel level, const char* format,
            va_list ap) override {
    spdlog::level::level_enum to = Map(level);
    if (!logger_->should_log(to)) return;
    char line[1024];
    std::vsnprintf(line, sizeof(line), format, ap);
    logger_->log(to, "rocksdb: {}", line);
  }

 private:
  static spdlog::level::level_enum Map(rocksdb::InfoLogLevel level) {
    switch (level) {
      case rocksdb::InfoLogLevel::WARN_LEVEL:
        return spdlog::level::warn;
      case rocksdb::InfoLogLevel::ERROR_LEVEL:
        return spdlog::level::err;
      case rocksdb::InfoLogLevel::FATAL_LEVEL:
        return spdlog::level::critical;
      default:  // DEBUG, INFO, HEADER
        return spdlog::level::debug;
    }
  }

  strata::Logger logger_;
};

}  // namespace

std::shared_ptr<rocksdb::Logger> NewRocksDbLog(Logger logger) {
  return std::make_shared<SpdlogRocksDbLog>(std::move(logger));
}

rocksdb::Options FailSafeRocksDbOptions(rocksdb::Options o, Logger logger) {
  o.info_log = NewRocksDbLog(std::move(logger));
  o.allow_fallocate = false;
  return o;
}

}  // namespace strata
