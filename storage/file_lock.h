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
  // The database file itself (created if missing, 0600) is flocked too, so a symlink or a hard link to a
  // database in use, whose lock file has another name, is refused as well (kConflict).
  static Result<std::unique_ptr<FileLock>> Acquire(const std::string& lock_path, const std::string& db_path);

  // Makes the database private to its owner (0600, and its -wal and -shm files): it holds live rank
  // credentials. Called once the file is known to be a Shepherd database (a refused file keeps its mode).
  Status MakePrivate(const std::string& db_path) const;

  // Releases the lock. The file is left in place: unlinking it would let two processes lock different
  // inodes under the same name.
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  FileLock(int fd, int db_fd) : fd_(fd), db_fd_(db_fd) {}
  int fd_;
  int db_fd_;  // the database file's flock: by inode, whatever path names it
};

}  // namespace shepherd
