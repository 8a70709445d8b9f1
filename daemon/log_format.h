// The log format of shepherdd and its agent: spdlog's default pattern, with the message escaped
// (core/log_text.h), so that no text a log line carries can end that line or forge another, whichever call
// site printed it.
#pragma once

namespace shepherd {

// Sets the escaping formatter on every sink of the default logger. Call once at start, before threads log.
void InstallEscapingLogFormat();

}  // namespace shepherd
