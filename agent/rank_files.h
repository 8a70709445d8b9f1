// What a rank leaves on its node besides its exit status: the tail of its log and PyTorch flight-recorder
// dumps. Stateless functions over the file system; thread-safe. The Supervisor (agent/supervisor.h) calls
// them when a rank exits, for every heartbeat's report, and before it stops a rank.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "agent/protocol.h"

namespace shepherd::agent {

// Bounds of a log tail sent with an exit (docs/agent-protocol.md).
constexpr std::size_t kLogTailBytes = 4096;
constexpr std::size_t kLogTailLines = 20;

// The last `max_lines` lines of the file at `path` within its last `max_bytes` bytes (a line cut by the
// byte bound is dropped unless it is the only one), as valid UTF-8 (invalid bytes become U+FFFD). A trailing
// newline is kept off. Empty when the file is missing, unreadable or empty.
std::string ReadLogTail(const std::string& path, std::size_t max_bytes = kLogTailBytes,
                        std::size_t max_lines = kLogTailLines);

// Regular files whose path starts with `prefix` (a directory part plus a file-name prefix), by path,
// among those `owner` (the rank's uid) owns, checked with lstat (symlinks are never followed). The
// directory is listed only when it is not a symlink and `owner` owns it or any user may list it. Empty
// prefix: none.
std::vector<DumpFile> FindDumps(const std::string& prefix, uid_t owner);

// PyTorch's on-demand dump trigger (TORCH_NCCL_DEBUG_INFO_PIPE_FILE): a process group with the flight
// recorder enabled reads the FIFO `<stem><rank>.pipe` and dumps when anything is written to it. Writes one
// byte, without blocking, to every FIFO whose path starts with `stem` and ends in ".pipe" and that `owner`
// owns (same rules as FindDumps). Returns how many had a reader (a FIFO nobody has open is skipped).
int PokeDumpPipes(const std::string& stem, uid_t owner);

}  // namespace shepherd::agent
