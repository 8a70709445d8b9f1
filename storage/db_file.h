// Start-up safety of the database file, checked before SQLite opens it. SQLite treats a zero-length file
// as a new, empty database and reads a truncated one until a query reaches a missing page: either way a
// daemon would start with its jobs, nodes and rank credentials silently gone (an operator's copy cut short,
// a full disk during a restore).
#pragma once

#include <string>

#include "core/status.h"

namespace shepherd {

// Ok when nothing exists at `path` or the file looks whole: at least
// SQLite's 100-byte header, that header's magic string, and as many bytes as the header says the database
// holds (when no write-ahead log is waiting to be applied: a checkpoint that was cut short may leave the
// file shorter than its header until SQLite replays the log). kUnavailable naming `path` and what is wrong
// otherwise; the file is only read. OpenSqliteStore calls it for a file that existed before it locked it.
Status CheckDatabaseFile(const std::string& path);

}  // namespace shepherd
