// An exclusive, advisory lock file that keeps two daemons off one database. Internal to storage/.
#pragma once

#include <memory>
#include <string>

#include "core/status.h"

namespace shepherd {

class FileLock {
 public:
  // Creates `lock_path` if needed and takes a non-blocking exclusive flock(2) on it, then records our pid in
  // it. If another open file description holds the lock (another process, or another FileLock in this
  // process), returns kConflict naming `db_path` and the holder's pid as recorded in the file.
  static Result<std::unique_ptr<FileLock>> Acquire(const std::string& lock_path, const std::string& db_path);

  // Releases the lock. The file is left in place: unlinking it would let two processes lock different
  // inodes under the same name.
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  explicit FileLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace shepherd
