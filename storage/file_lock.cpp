#include "storage/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace shepherd {
namespace {

// The pid the current holder wrote, or empty when unreadable (it may be between flock and write).
std::string ReadHolderPid(int fd) {
  char buf[32] = {};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return {};
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace

Result<std::unique_ptr<FileLock>> FileLock::Acquire(const std::string& lock_path,
                                                    const std::string& db_path) {
  // No O_TRUNC: the file may hold the current owner's pid, which we report on conflict.
  int fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    return Unavailable("cannot open lock file " + lock_path + ": " + std::strerror(errno));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    std::string holder = ReadHolderPid(fd);
    close(fd);
    if (err == EWOULDBLOCK) {
      return Conflict("database " + db_path + " is already in use by another shepherdd" +
                      (holder.empty() ? std::string() : " (pid " + holder + ")"));
    }
    return Unavailable("cannot lock " + lock_path + ": " + std::strerror(err));
  }
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    int err = errno;
    close(fd);
    return Unavailable("cannot write lock file " + lock_path + ": " + std::strerror(err));
  }
  return std::unique_ptr<FileLock>(new FileLock(fd));
}

FileLock::~FileLock() {
  close(fd_);
}

}  // namespace shepherd
