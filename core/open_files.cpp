#include "core/open_files.h"

#include <sys/resource.h>

namespace shepherd {

OpenFilesLimit RaiseOpenFilesLimit() {
  OpenFilesLimit out;
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) {
    out.known = false;
    return out;
  }
  out.soft_before = lim.rlim_cur;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < lim.rlim_max) {
    rlimit raised = lim;
    raised.rlim_cur = lim.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) lim = raised;
  }
  out.unlimited = lim.rlim_cur == RLIM_INFINITY;
  out.soft = lim.rlim_cur;
  out.hard = lim.rlim_max;
  return out;
}

std::string Describe(const OpenFilesLimit& l) {
  if (!l.known) return "open files: the limit could not be read";
  if (l.unlimited) return "open files: no limit";
  std::string hard = l.hard == RLIM_INFINITY ? std::string("unlimited") : std::to_string(l.hard);
  if (l.soft != l.soft_before)
    return "open files: soft limit " + std::to_string(l.soft_before) + " raised to " + std::to_string(l.soft) +
           " (the hard limit)";
  if (l.soft < l.hard)
    return "open files: soft limit " + std::to_string(l.soft) + " (could not be raised to the hard limit " +
           hard + ")";
  return "open files: soft limit " + std::to_string(l.soft) + " (already the hard limit)";
}

std::size_t ConnectionsThatFit(const OpenFilesLimit& l, std::size_t wanted, std::size_t reserved) {
  if (!l.known || l.unlimited) return wanted;
  const uint64_t room = l.soft > reserved + 1 ? l.soft - reserved : 1;
  return wanted <= room ? wanted : static_cast<std::size_t>(room);
}

}  // namespace shepherd
