// Constructors of the storage backends (internal; use OpenStorage).
#pragma once

#include <memory>
#include <string>

#include "checkpoint/storage.h"

namespace strata::checkpoint {

std::shared_ptr<Storage> NewFileStorage(const std::string& dir, int rank);
StatusOr<std::shared_ptr<Storage>> NewRocksDbStorage(const std::string& dir,
                                                     int rank, bool writable);

}  // namespace strata::checkpoint
