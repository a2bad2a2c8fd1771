#include "checkpoint/safetensors.h"

#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "checkpoint/reader.h"

namespace strata::checkpoint {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

// Writes the header and every tensor, loaded whole, to `f`.
Status WriteTensors(Storage& storage, int64_t step, const Manifest& m,
                    const std::string& header, std::ofstream& f) {
  const uint64_t n = header.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = static_cast<unsigned char>(n >> (8 * i));
  f.write(reinterpret_cast<const char*>(len), 8);
  f << header;
  std::vector<char> buf;
  for (const TensorMeta& t : m.tensors()) {
    ShardedTensor full;
    full.name = t.name();
    ASSIGN_OR_RETURN(full.dtype, ParseDType(t.dtype()));
    full.global_shape.assign(t.global_shape().begin(), t.global_shape().end());
    full.local_shape = full.global_shape;
    full.global_offset.assign(full.global_shape.size(), 0);
    buf.resize(full.Bytes());
    full.data = buf.data();
    std::vector<ShardedTensor> targets = {full};
    RETURN_IF_ERROR(Load(storage, step, targets));
    f.write(buf.data(), static_cast<std::streamsize>(buf.size()));
  }
  return absl::OkStatus();
}

}  // namespace

Status ExportSafetensors(const std::string& uri, int64_t step,
                         const std::string& out) {
  ASSIGN_OR_RETURN(PinnedStep p, OpenStep(uri, step));
  return ExportSafetensors(*p.storage, step, out);
}

Status ExportSafetensors(Storage& storage, int64_t step,
                         const std::string& out) {
  ASSIGN_OR_RETURN(Manifest m, ReadManifest(storage, step));
  // Header: offsets follow the manifest's tensor order.
  std::vector<std::string> entries;
  uint64_t offset = 0;
  for (const TensorMeta& t : m.tensors()) {
    ASSIGN_OR_RETURN(DType dt, ParseDType(t.dtype()));
    uint64_t bytes = DTypeSize(dt);
    for (int64_t d : t.global_shape()) bytes *= static_cast<uint64_t>(d);
    entries.push_back(absl::StrCat(
        JsonString(t.name()), ":{\"dtype\":\"", t.dtype(), "\",\"shape\":[",
        absl::StrJoin(t.global_shape(), ","), "],\"data_offsets\":[", offset,
        ",", offset + bytes, "]}"));
    offset += bytes;
  }
  entries.push_back(absl::StrCat(
      "\"__metadata__\":{\"format\":\"pt\",\"step\":\"", step, "\"}"));
  std::string header = "{" + absl::StrJoin(entries, ",") + "}";
  header.append((8 - header.size() % 8) % 8, ' ');  // align the data to 8 bytes
  const std::string tmp = out + ".tmp";
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) return ErrnoToStatus(errno, "open " + tmp);
  Status st = WriteTensors(storage, step, m, header, f);
  f.close();
  if (st.ok() && !f) st = absl::UnavailableError("write failed: " + tmp);
  if (st.ok() && std::rename(tmp.c_str(), out.c_str()) != 0)
    st = ErrnoToStatus(errno, "rename " + tmp);
  if (!st.ok()) std::remove(tmp.c_str());
  return st;
}

}  // namespace strata::checkpoint
