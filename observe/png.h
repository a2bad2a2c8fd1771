// PNG encoding of an RGB raster (the PNG specification, W3C 2003 / ISO
// 15948: signature, IHDR, one zlib-compressed IDAT of scanlines with filter
// type 0, IEND; chunk CRCs are CRC-32 as zlib computes it). For pictures
// the CLI writes where a browser is not at hand (`strata heatmap -o x.png`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace strata::observe {

// REQUIRES: width, height > 0; rgb.size() == width * height * 3 (rows top
// to bottom, pixels left to right).
std::string EncodePng(int width, int height, const std::vector<uint8_t>& rgb);

}  // namespace strata::observe
