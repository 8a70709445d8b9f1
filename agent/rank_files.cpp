#include "agent/rank_files.h"

#include <dirent.h>
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

// A file-system entry of a rank's dump directory, as lstat saw it.
struct OwnedEntry {
  std::string path;
  struct stat st;
};

// Entries of `prefix`'s directory whose file name starts with `prefix`'s file name and which `owner` owns
// (lstat: a symlink is never followed). The directory is read only when `owner` owns it or anyone may list
// it anyway (o+rx), and it is not itself a symlink: a job naming a root-only directory as its dump prefix
// learns nothing of it from the agent, whatever the agent's own privileges.
std::vector<OwnedEntry> OwnedEntriesWithPrefix(const std::string& prefix, uid_t owner) {
  std::vector<OwnedEntry> out;
  if (prefix.empty()) return out;
  fs::path pre(prefix);
  const std::string stem = pre.filename().string();
  const std::string dir = pre.parent_path().empty() ? "." : pre.parent_path().string();
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return out;
  struct stat dst {};
  if (::fstat(fd, &dst) != 0 || (dst.st_uid != owner && (dst.st_mode & 05) != 05)) {
    ::close(fd);
    return out;
  }
  DIR* d = ::fdopendir(fd);
  if (!d) {
    ::close(fd);
    return out;
  }
  while (const struct dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    if (name == "." || name == ".." || !name.starts_with(stem)) continue;
    OwnedEntry entry{(pre.parent_path() / std::string(name)).string(), {}};
    if (::fstatat(::dirfd(d), e->d_name, &entry.st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (entry.st.st_uid == owner) out.push_back(std::move(entry));
  }
  ::closedir(d);
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

std::vector<DumpFile> FindDumps(const std::string& prefix, uid_t owner) {
  std::vector<DumpFile> out;
  for (const OwnedEntry& e : OwnedEntriesWithPrefix(prefix, owner))
    if (S_ISREG(e.st.st_mode)) out.push_back({e.path, static_cast<std::uint64_t>(e.st.st_size)});
  std::sort(out.begin(), out.end(), [](const DumpFile& a, const DumpFile& b) { return a.path < b.path; });
  return out;
}

int PokeDumpPipes(const std::string& stem, uid_t owner) {
  int poked = 0;
  for (const OwnedEntry& e : OwnedEntriesWithPrefix(stem, owner)) {
    if (!S_ISFIFO(e.st.st_mode) || !e.path.ends_with(".pipe")) continue;
    // O_NONBLOCK: ENXIO instead of blocking when the rank has not opened its end.
    int fd = ::open(e.path.c_str(), O_WRONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    if (::write(fd, "1", 1) == 1) ++poked;
    ::close(fd);
  }
  return poked;
}

}  // namespace shepherd::agent
