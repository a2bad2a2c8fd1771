// Per-module spdlog loggers (STYLE.md "Config and logging"): INIT, COMM,
// TOPO, PLAN, CKPT, FAULT, ... Classes take a logger in their constructor;
// GetLogger() is for wiring at the top of a program and for defaults.
#pragma once

#include <memory>
#include <string>

#include "spdlog/spdlog.h"

namespace strata {

using Logger = std::shared_ptr<spdlog::logger>;

// Returns the logger named `module`, creating it on first use. Loggers write
// to stderr, so stdout stays for command output. Thread-safe.
Logger GetLogger(const std::string& module);

// Sets the level of every existing and future logger: "trace", "debug",
// "info", "warn", "error", "off". Unknown names leave the level unchanged and
// return false.
bool SetLogLevel(const std::string& level);

}  // namespace strata
