#include "agent/rank_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/json.h"

namespace shepherd::agent {
namespace fs = std::filesystem;

namespace {

// Entries of `prefix`'s directory whose file name starts with `prefix`'s file name.
std::vector<fs::directory_entry> EntriesWithPrefix(const std::string& prefix) {
  std::vector<fs::directory_entry> out;
  if (prefix.empty()) return out;
  fs::path pre(prefix);
  std::string stem = pre.filename().string();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(pre.parent_path(), ec))
    if (entry.path().filename().string().rfind(stem, 0) == 0) out.push_back(entry);
  return out;
}

}  // namespace

std::string ReadLogTail(const std::string& path, std::size_t max_bytes, std::size_t max_lines) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in || max_bytes == 0 || max_lines == 0) return "";
  const std::streamoff size = in.tellg();
  if (size <= 0) return "";
  const std::streamoff from = size > static_cast<std::streamoff>(max_bytes) ? size - max_bytes : 0;
  std::string text(static_cast<std::size_t>(size - from), '\0');
  in.seekg(from);
  if (!in.read(text.data(), static_cast<std::streamsize>(text.size()))) return "";
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  // A first line cut by the byte bound is partial: drop it when a whole line follows.
  if (from > 0)
    if (std::size_t nl = text.find('\n'); nl != std::string::npos) text.erase(0, nl + 1);
  std::size_t keep_from = 0, pos = text.size();  // after the max_lines-th newline from the end
  for (std::size_t n = 0; n < max_lines && pos > 0; ++n) {
    std::size_t nl = text.rfind('\n', pos - 1);
    if (nl == std::string::npos) {
      keep_from = 0;
      break;
    }
    keep_from = nl + 1;
    pos = nl;
  }
  text.erase(0, keep_from);
  // Rank output is arbitrary bytes; the protocol carries JSON strings.
  return Json::parse(Json(text).dump(-1, ' ', false, Json::error_handler_t::replace)).get<std::string>();
}

std::vector<DumpFile> FindDumps(const std::string& prefix) {
  std::vector<DumpFile> out;
  for (const fs::directory_entry& entry : EntriesWithPrefix(prefix)) {
    std::error_code ec;
    if (!entry.is_regular_file(ec)) continue;
    std::uintmax_t size = fs::file_size(entry.path(), ec);
    if (!ec) out.push_back({entry.path().string(), static_cast<std::uint64_t>(size)});
  }
  std::sort(out.begin(), out.end(), [](const DumpFile& a, const DumpFile& b) { return a.path < b.path; });
  return out;
}

int PokeDumpPipes(const std::string& stem) {
  int poked = 0;
  for (const fs::directory_entry& entry : EntriesWithPrefix(stem)) {
    std::error_code ec;
    const std::string path = entry.path().string();
    if (!entry.is_fifo(ec) || !path.ends_with(".pipe")) continue;
    // O_NONBLOCK: ENXIO instead of blocking when the rank has not opened its end.
    int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    if (::write(fd, "1", 1) == 1) ++poked;
    ::close(fd);
  }
  return poked;
}

}  // namespace shepherd::agent
