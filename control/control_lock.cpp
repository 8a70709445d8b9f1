// ControlThread's checks: out of line, so whether they run is the control library's build's choice
// (NDEBUG), whatever its includers define.
#include "control/control_lock.h"

#include <cstdio>
#include <cstdlib>

namespace shepherd {
namespace {

#ifndef NDEBUG
[[noreturn]] void Abort(const char* what, const void* caller) {
  std::fprintf(stderr, "shepherd: %s (called from %p)\n", what, caller);
  std::abort();
}
#endif

}  // namespace

void ControlThread::Assert() const {
#ifndef NDEBUG
  if (!IsCurrent()) Abort("control state changed off the control thread", __builtin_return_address(0));
#endif
}

void ControlThread::AssertShared() const {
#ifndef NDEBUG
  if (!IsCurrent() && !ControlLock::ReadHeldHere())
    Abort("control state read off the control thread without the shared control lock",
          __builtin_return_address(0));
#endif
}

// Whether ControlThread's assertions check in this build (its tests skip the death cases otherwise).
// Declared where it is used (tests/control/control_lock_test.cpp), so control_lock.h stays as it is.
bool ControlThreadChecks() {
#ifndef NDEBUG
  return true;
#else
  return false;
#endif
}

}  // namespace shepherd
