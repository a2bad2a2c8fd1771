// Constructors of the storage backends (internal; use OpenStorage).
#pragma once

#include <memory>
#include <string>

#include "checkpoint/storage.h"

namespace strata::checkpoint {

std::shared_ptr<Storage> NewFileStorage(const std::string& dir, int rank);
StatusOr<std::shared_ptr<Storage>> NewRocksDbStorage(const std::string& dir,
                                                     int rank, bool writable);
// mem://[DIR]: DIR, else $STRATA_MEM_DIR (checkpoint/mem_wire.h).
StatusOr<std::shared_ptr<Storage>> NewMemStorage(const std::string& dir,
                                                 int rank);
// The local directory of a mem:// URI (DIR or $STRATA_MEM_DIR).
StatusOr<std::string> MemTierDir(const std::string& uri);

}  // namespace strata::checkpoint
