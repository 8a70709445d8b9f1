#include "storage/file_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
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

// Owner-only: the database holds live rank credentials (and the -wal and -shm files copies of its pages).
// SQLite gives new -wal and -shm files the database's mode; existing ones are tightened here.
Status MakeFilesPrivate(int fd, const std::string& db_path) {
  struct stat st {};
  if (fstat(fd, &st) != 0) return Unavailable("cannot stat " + db_path + ": " + std::strerror(errno));
  if ((st.st_mode & 077) != 0 && fchmod(fd, st.st_mode & 0700) != 0)
    return Unavailable("cannot make " + db_path + " private (chmod 600): " + std::strerror(errno));
  for (const char* suffix : {"-wal", "-shm"}) {
    const std::string side = db_path + suffix;
    if (stat(side.c_str(), &st) == 0 && (st.st_mode & 077) != 0 &&
        chmod(side.c_str(), st.st_mode & 0700) != 0)
      return Unavailable("cannot make " + side + " private (chmod 600): " + std::strerror(errno));
  }
  return Status::Ok();
}

// An exclusive flock on the database file itself: the lock file is found by name, this one by inode, so a
// second daemon given a symlink or a hard link to a database in use is refused too.
Result<int> LockDatabaseFile(const std::string& db_path) {
  int fd = open(db_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return Unavailable("cannot open database " + db_path + ": " + std::strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    close(fd);
    if (err == EWOULDBLOCK)
      return Conflict("database " + db_path +
                      " is already in use by another shepherdd (the same file under another name: a link)");
    return Unavailable("cannot lock " + db_path + ": " + std::strerror(err));
  }
  return fd;
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
  Result<int> db_fd = LockDatabaseFile(db_path);
  if (!db_fd.ok()) {
    close(fd);
    return db_fd.status();
  }
  return std::unique_ptr<FileLock>(new FileLock(fd, *db_fd));
}

Status FileLock::MakePrivate(const std::string& db_path) const {
  return MakeFilesPrivate(db_fd_, db_path);
}

FileLock::~FileLock() {
  close(db_fd_);
  close(fd_);
}

}  // namespace shepherd
