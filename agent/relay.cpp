#include "agent/relay.h"

#include <dirent.h>
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>

namespace shepherd::agent {
namespace fs = std::filesystem;

namespace {

// An open directory, closed on scope exit.
struct Dir {
  DIR* d = nullptr;
  ~Dir() {
    if (d) ::closedir(d);
  }
};

// Opens `dir` for reading when it is a directory (not a symlink) that `owner` owns.
bool OpenOwnedDir(const std::string& dir, uid_t owner, Dir* out) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || st.st_uid != owner) {
    ::close(fd);
    return false;
  }
  out->d = ::fdopendir(fd);
  if (!out->d) ::close(fd);
  return out->d != nullptr;
}

std::vector<std::string> BatchNames(DIR* d) {
  std::vector<std::string> names;
  while (const struct dirent* e = ::readdir(d))
    if (IsRelayFileName(e->d_name)) names.emplace_back(e->d_name);
  std::sort(names.begin(), names.end());  // fixed width: by name is by time, then counter
  return names;
}

}  // namespace

bool IsRelayFileName(const std::string& name) {
  if (name.size() != 25 || name[13] != '-' || name.compare(20, 5, ".json") != 0) return false;
  for (std::size_t i = 0; i < 20; ++i)
    if (i != 13 && !std::isdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

std::string RelayDirPath(const std::string& state_dir, const RankKey& key) {
  return (fs::path(state_dir) / "relay" /
          (key.job + "-a" + std::to_string(key.attempt) + "-r" + std::to_string(key.rank)))
      .string();
}

Result<std::string> MakeRelayDir(const std::string& state_dir, const RankKey& key,
                                 std::optional<RelayOwner> owner) {
  const std::string dir = RelayDirPath(state_dir, key);
  std::error_code ec;
  fs::create_directories(fs::path(dir).parent_path(), ec);
  if (ec) return Internal("relay directory " + fs::path(dir).parent_path().string() + ": " + ec.message());
  fs::remove_all(dir, ec);  // an earlier agent's leftover: another process's files, never relayed as ours
  if (::mkdir(dir.c_str(), 0700) != 0)
    return Internal("relay directory " + dir + ": " + std::strerror(errno));
  if (owner && ::chown(dir.c_str(), owner->uid, owner->gid) != 0) {
    const std::string why = std::strerror(errno);
    ::rmdir(dir.c_str());
    return Internal("relay directory " + dir + ": chown: " + why);
  }
  return dir;
}

void RemoveRelayDir(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) spdlog::warn("agent: cannot remove relay directory {}: {}", dir, ec.message());
}

bool HasRelayFiles(const std::string& dir, uid_t owner) {
  Dir d;
  if (dir.empty() || !OpenOwnedDir(dir, owner, &d)) return false;
  while (const struct dirent* e = ::readdir(d.d))
    if (IsRelayFileName(e->d_name)) return true;
  return false;
}

RelayRead ReadRelayDir(const std::string& dir, uid_t owner, std::size_t max_reports, std::size_t max_bytes,
                       std::size_t budget) {
  budget = std::min(budget, max_bytes);
  RelayRead out;
  Dir d;
  if (dir.empty() || !OpenOwnedDir(dir, owner, &d)) return out;
  const int dfd = ::dirfd(d.d);
  std::size_t reports = 0;
  for (const std::string& name : BatchNames(d.d)) {
    const std::string path = dir + "/" + name;
    auto malformed = [&](const std::string& why) {
      ::unlinkat(dfd, name.c_str(), 0);  // a symlink is removed itself, never its target
      ++out.malformed;
      spdlog::warn("agent: relayed report file {} {}: deleted unread", path, why);
    };
    int fd = ::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ELOOP) malformed("is a symlink");
      continue;  // gone meanwhile, or unreadable: nothing to relay
    }
    struct stat st {};
    std::string text;
    std::string bad;
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      bad = "is not a regular file";
    } else if (st.st_uid != owner) {
      bad = "is not the rank's user's";
    } else if (static_cast<std::size_t>(st.st_size) > max_bytes) {
      bad = "is larger than " + std::to_string(max_bytes) + " bytes";
    } else if (out.bytes + static_cast<std::size_t>(st.st_size) > budget) {
      ::close(fd);
      out.more = true;
      break;
    } else {
      text.resize(static_cast<std::size_t>(st.st_size) + 1);
      std::size_t got = 0;
      while (got < text.size()) {
        ssize_t n = ::read(fd, text.data() + got, text.size() - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<std::size_t>(n);
      }
      if (got > max_bytes) bad = "grew past " + std::to_string(max_bytes) + " bytes";
      text.resize(got);
    }
    ::close(fd);
    if (!bad.empty()) {
      malformed(bad);
      continue;
    }
    Json body = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    Json* list = body.is_object() && body.contains("reports") ? &body["reports"] : nullptr;
    if (!list || !list->is_array() ||
        !std::all_of(list->begin(), list->end(), [](const Json& r) { return r.is_object(); })) {
      malformed("is not {\"reports\": [objects]}");
      continue;
    }
    if (list->size() > max_reports) {
      malformed("holds more than " + std::to_string(max_reports) + " reports");
      continue;
    }
    if (reports + list->size() > max_reports) {
      out.more = true;
      break;
    }
    reports += list->size();
    out.bytes += text.size();
    for (Json& r : *list) out.reports.push_back(std::move(r));
    out.files.push_back(path);
  }
  return out;
}

void DeleteRelayFiles(const std::vector<std::string>& files) {
  for (const std::string& f : files)
    if (::unlink(f.c_str()) != 0 && errno != ENOENT)
      spdlog::warn("agent: cannot delete relayed report file {}: {}", f, std::strerror(errno));
}

}  // namespace shepherd::agent
