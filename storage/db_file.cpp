#include "storage/db_file.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>

namespace shepherd {
namespace {

constexpr std::size_t kHeaderBytes = 100;     // https://www.sqlite.org/fileformat.html, "The Database Header"
constexpr char kMagic[] = "SQLite format 3";  // 16 bytes with its NUL

uint32_t BigEndian(const unsigned char* p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

Status Refused(const std::string& path, const std::string& what) {
  return Unavailable("database " + path + " " + what +
                     ": refusing to start (nothing was changed; restore the file from a backup, or move "
                     "it away to start with a new, empty database)");
}

}  // namespace

Status CheckDatabaseFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return Status::Ok();
    return Unavailable("database " + path + ": " + std::strerror(errno));
  }
  if (!S_ISREG(st.st_mode)) return Unavailable("database " + path + " is not a regular file");
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size == 0) return Refused(path, "is an empty file (0 bytes), not a database");
  unsigned char h[kHeaderBytes] = {};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Unavailable("database " + path + ": cannot be read");
  in.read(reinterpret_cast<char*>(h), kHeaderBytes);
  if (static_cast<std::size_t>(in.gcount()) < kHeaderBytes)
    return Refused(path, "is truncated: " + std::to_string(size) + " bytes, shorter than SQLite's header");
  if (std::memcmp(h, kMagic, sizeof kMagic) != 0)
    return Refused(path, "is not an SQLite database (its first bytes are not SQLite's header)");
  const uint32_t page_size = BigEndian(h + 16, 2) == 1 ? 65536 : BigEndian(h + 16, 2);
  const uint32_t pages = BigEndian(h + 28, 4);
  // The header's page count is valid only when its change counter matches "version-valid-for".
  const bool counted = pages != 0 && BigEndian(h + 24, 4) == BigEndian(h + 92, 4);
  struct stat wal {};
  const bool wal_waiting = ::stat((path + "-wal").c_str(), &wal) == 0 && wal.st_size > 0;
  if (counted && !wal_waiting && size < uint64_t{pages} * page_size)
    return Refused(path, "is truncated: its header says " + std::to_string(pages) + " pages of " +
                             std::to_string(page_size) + " bytes (" +
                             std::to_string(uint64_t{pages} * page_size) + " bytes), the file has " +
                             std::to_string(size));
  return Status::Ok();
}

}  // namespace shepherd
