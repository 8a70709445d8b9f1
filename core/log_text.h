// Untrusted text in log lines. A log line is one record: text from a request, a report, a heartbeat, a
// Slurm command's output or a file could otherwise end it and forge the next ("boom\n[info] job ...
// succeeded"), or move a terminal's cursor (ESC sequences). Pure.
#pragma once

#include <string>
#include <string_view>

namespace shepherd {

// `text` with backslash as "\\", line feed, carriage return and tab as "\n", "\r", "\t", every other C0
// control character and DEL as "\xNN", and the Unicode line breaks NEL, LS and PS as "\u0085", "\u2028",
// "\u2029". Everything else (printable ASCII, other UTF-8, quotes) is kept: log lines do not quote text.
std::string EscapeLogText(std::string_view text);

// Whether EscapeLogText would change `text` (the common case is no: nothing is copied then).
bool NeedsLogEscape(std::string_view text);

}  // namespace shepherd
