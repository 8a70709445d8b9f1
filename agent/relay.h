// Relayed reports (docs/agent-protocol.md, "Relayed reports"): every rank the agent starts gets a directory
// <state-dir>/relay/<job>-a<attempt>-r<rank>/ (its SHEPHERD_RELAY_DIR, mode 0700, owned by the rank's user)
// into which its client writes the report batches it would have posted, one file each,
// `<unix-ms, 13 digits>-<counter, 6 digits>.json` holding {"reports": [...]}. Each heartbeat carries what
// the files hold, oldest first, and the agent deletes the files once the daemon answered that heartbeat 200,
// so a node makes one request per interval however many ranks it runs, and nothing is lost while the daemon
// is away (the files wait; the client keeps buffering in memory once 64 are pending).
//
// Stateless functions over the file system; thread-safe. The Supervisor (agent/supervisor.h) makes and
// removes the directories; the supervision thread reads them for each heartbeat.
// Trust: the files are the rank's. The directory is read only when it is not a symlink and the rank's user
// owns it; each file is opened with O_NOFOLLOW and read only when it is a regular file of that user of at
// most the per-rank byte bound holding {"reports": [objects]} of at most the per-rank report bound.
// Anything else named like a batch is deleted unread, logged and counted (`malformed`); other names (the
// client's `.tmp` files) are left alone.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agent/reconcile.h"
#include "core/json.h"
#include "core/status.h"

namespace shepherd::agent {

// Per rank per heartbeat: reports and file bytes (a file larger than either alone is malformed).
inline constexpr std::size_t kRelayMaxReports = 256;
inline constexpr std::size_t kRelayMaxBytes = 256 << 10;
// Per heartbeat: ranks (entries of `reports`) and file bytes in all, well inside the daemon's 4 MiB body
// limit with the heartbeat's own fields.
inline constexpr std::size_t kRelayMaxRanks = 64;
inline constexpr std::size_t kRelayMaxHeartbeatBytes = 2 << 20;

// <state_dir>/relay/<job>-a<attempt>-r<rank>
std::string RelayDirPath(const std::string& state_dir, const RankKey& key);

// Creates RelayDirPath (and <state_dir>/relay, 0755) as a fresh directory of mode 0700 owned by uid:gid
// (when `owner` is set; else the agent's own). A leftover of an earlier agent is emptied first. Returns
// its path.
struct RelayOwner {
  uid_t uid = 0;
  gid_t gid = 0;
};
Result<std::string> MakeRelayDir(const std::string& state_dir, const RankKey& key,
                                 std::optional<RelayOwner> owner);

// Removes `dir` and everything in it (symlinks are removed, never followed). Empty path: nothing.
void RemoveRelayDir(const std::string& dir);

// Whether a file named like a batch waits in `dir` that ReadRelayDir would look at (`owner`'s directory).
bool HasRelayFiles(const std::string& dir, uid_t owner);

// What one heartbeat relays of one rank.
struct RelayRead {
  Json reports = Json::array();    // the reports, oldest file first
  std::vector<std::string> files;  // the files they came from: delete them once the heartbeat is answered 200
  std::size_t bytes = 0;           // the files' size in all
  int malformed = 0;               // files deleted unread (see the header comment)
  bool more = false;               // files left for a later heartbeat (over a bound)
};
// Reads `dir`'s batch files oldest first (by name) while the reports stay within `max_reports` and the
// bytes within `max_bytes` and `budget` (what is left of the heartbeat's bytes). A file over `max_bytes` or
// `max_reports` alone is malformed (it could never be sent). `owner`: the rank's uid.
RelayRead ReadRelayDir(const std::string& dir, uid_t owner, std::size_t max_reports = kRelayMaxReports,
                       std::size_t max_bytes = kRelayMaxBytes, std::size_t budget = kRelayMaxBytes);

// Deletes files a heartbeat carried (after its 200 answer). Missing files are fine.
void DeleteRelayFiles(const std::vector<std::string>& files);

// Whether `name` is a batch file's name: 13 digits, '-', 6 digits, ".json".
bool IsRelayFileName(const std::string& name);

}  // namespace shepherd::agent
