// Files compiled into a binary by the CMake helper strata_embed_files()
// (presets of clusters and models), so commands work from any directory.
#pragma once

namespace strata {

struct EmbeddedFile {
  const char* name;      // file stem, e.g. "dgx-h100"
  const char* contents;  // whole file text
};

}  // namespace strata
