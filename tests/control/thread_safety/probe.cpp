// Compiled, not run, by the thread_safety_* tests (tests/control/CMakeLists.txt) with the build's
// -Wthread-safety -Werror: PROBE selects one use of control state. The "ok" probes must compile; each other
// probe is a mistake the analysis must refuse, and the test expects its message.
#include "control/control_lock.h"
#include "control/inventory.h"

namespace shepherd {

struct Owned {
  int count GUARDED_BY(kControl) = 0;
};

#if PROBE == 0  // ok: the control thread's operation writes, the reader's route reads
void Operation(ControlLock& lock, Inventory& inventory, Owned& owned) {
  ControlHold hold(lock);
  WriteBatch batch;
  (void)inventory.Remove("node-1", &batch);
  ++owned.count;
}
int Read(ControlLock& lock, const Inventory& inventory, const Owned& owned) {
  ControlReadHold hold(lock);
  return static_cast<int>(inventory.View("node-1").has_value()) + owned.count;
}
void Asserted(const ControlThread& thread, Inventory& inventory) {
  thread.Assert();
  WriteBatch batch;
  (void)inventory.Remove("node-1", &batch);
}
#elif PROBE == 1  // an owner's const method called holding nothing
bool Read(const Inventory& inventory) {
  return inventory.View("node-1").has_value();
}
#elif PROBE == 2  // an owner's mutator called under the reader's shared hold
void Write(ControlLock& lock, Inventory& inventory) {
  ControlReadHold hold(lock);
  WriteBatch batch;
  (void)inventory.Remove("node-1", &batch);
}
#elif PROBE == 3  // guarded state written holding nothing
void Write(Owned& owned) {
  ++owned.count;
}
#elif PROBE == 4  // guarded state written by a reader that only asserted a shared hold
void Write(const ControlThread& thread, Owned& owned) {
  thread.AssertShared();
  owned.count = 1;
}
#endif

}  // namespace shepherd
