#include "coordinator/jobs/log_store.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace strata::coordinator {
namespace {

constexpr int64_t kDefaultReadBytes = 1 << 20;

Status AppendFile(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary | std::ios::app);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  out.flush();
  if (!out) return absl::InternalError(absl::StrCat("cannot append to ", path));
  return absl::OkStatus();
}

// Job ids are generated ("job-<n>") but requests carry them from clients:
// refuse anything that could escape the logs directory.
Status CheckJobId(const std::string& job_id) {
  if (job_id.empty() || job_id.find('/') != std::string::npos ||
      job_id.find("..") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid job id '", job_id, "'"));
  }
  return absl::OkStatus();
}

}  // namespace

LogStore::LogStore(std::string dir) : dir_(std::move(dir)) {}

std::string LogStore::JobDir(const std::string& job_id) const {
  return absl::StrCat(dir_, "/", job_id);
}

Status LogStore::Append(const control::LogChunk& chunk) {
  RETURN_IF_ERROR(CheckJobId(chunk.job_id()));
  std::error_code ec;
  std::filesystem::create_directories(JobDir(chunk.job_id()), ec);
  if (ec) {
    return absl::InternalError(absl::StrCat(
        "cannot create ", JobDir(chunk.job_id()), ": ", ec.message()));
  }
  RETURN_IF_ERROR(AppendFile(
      absl::StrCat(JobDir(chunk.job_id()), "/rank-", chunk.rank(), ".log"),
      chunk.data()));
  std::string merged;
  std::string prefix = absl::StrCat("[rank ", chunk.rank(), "] ");
  for (absl::string_view line : absl::StrSplit(chunk.data(), '\n')) {
    if (line.empty()) continue;
    absl::StrAppend(&merged, prefix, line, "\n");
  }
  return AppendFile(absl::StrCat(JobDir(chunk.job_id()), "/all.log"), merged);
}

Status LogStore::Note(const std::string& job_id, const std::string& line) {
  RETURN_IF_ERROR(CheckJobId(job_id));
  std::error_code ec;
  std::filesystem::create_directories(JobDir(job_id), ec);
  return AppendFile(absl::StrCat(JobDir(job_id), "/all.log"),
                    absl::StrCat(line, "\n"));
}

StatusOr<control::LogsReply> LogStore::Read(
    const control::LogsRequest& request) const {
  RETURN_IF_ERROR(CheckJobId(request.job_id()));
  std::string path = request.rank() < 0
                         ? absl::StrCat(JobDir(request.job_id()), "/all.log")
                         : absl::StrCat(JobDir(request.job_id()), "/rank-",
                                        request.rank(), ".log");
  control::LogsReply reply;
  std::error_code ec;
  int64_t size = static_cast<int64_t>(std::filesystem::file_size(path, ec));
  if (ec) size = 0;
  int64_t offset = request.offset();
  if (offset < 0) offset = std::max<int64_t>(0, size + offset);
  offset = std::min(offset, size);
  // Never more than the default: a reply must fit in one control frame.
  int64_t max = request.max_bytes() > 0
                    ? std::min<int64_t>(request.max_bytes(), kDefaultReadBytes)
                    : kDefaultReadBytes;
  int64_t n = std::min(max, size - offset);
  std::string data(static_cast<size_t>(n), '\0');
  if (n > 0) {
    std::ifstream in(path, std::ios::binary);
    in.seekg(offset);
    in.read(data.data(), n);
    if (!in) return absl::InternalError(absl::StrCat("cannot read ", path));
  }
  reply.set_data(std::move(data));
  reply.set_next_offset(offset + n);
  return reply;
}

}  // namespace strata::coordinator
