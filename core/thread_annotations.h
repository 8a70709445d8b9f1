// Clang's thread-safety attributes (https://clang.llvm.org/docs/ThreadSafetyAnalysis.html) as macros, so
// which thread may touch what is stated in the code and checked by the compiler: clang with
// -Wthread-safety (the CMake option SHEPHERD_THREAD_SAFETY) reports an access to state GUARDED_BY a
// capability, or a call to a function that REQUIRES one, where the capability is not held. Other compilers
// see nothing (every macro is empty). Header only; no runtime cost.
//
// The capability Shepherd names is the control lock's (control/control_lock.h): kControl.
#pragma once

#if defined(__clang__)
#define SHEPHERD_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SHEPHERD_THREAD_ANNOTATION(x)
#endif

// On a class: its objects are capabilities (a lock, a role); `name` appears in the compiler's messages.
#define CAPABILITY(name) SHEPHERD_THREAD_ANNOTATION(capability(name))
// On a class: an RAII object that holds a capability for its lifetime.
#define SCOPED_CAPABILITY SHEPHERD_THREAD_ANNOTATION(scoped_lockable)
// On a data member: read only while the capability is held (shared or exclusive), written only while it
// is held exclusively.
#define GUARDED_BY(x) SHEPHERD_THREAD_ANNOTATION(guarded_by(x))
// On a pointer member: the data it points to is guarded so.
#define PT_GUARDED_BY(x) SHEPHERD_THREAD_ANNOTATION(pt_guarded_by(x))
// On a function: the caller holds the capability exclusively / at least shared.
#define REQUIRES(...) SHEPHERD_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define REQUIRES_SHARED(...) SHEPHERD_THREAD_ANNOTATION(requires_shared_capability(__VA_ARGS__))
// On a function: it takes / gives back the capability (exclusive, shared, either).
#define ACQUIRE(...) SHEPHERD_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) SHEPHERD_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) SHEPHERD_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) SHEPHERD_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define RELEASE_GENERIC(...) SHEPHERD_THREAD_ANNOTATION(release_generic_capability(__VA_ARGS__))
#define TRY_ACQUIRE(...) SHEPHERD_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define TRY_ACQUIRE_SHARED(...) SHEPHERD_THREAD_ANNOTATION(try_acquire_shared_capability(__VA_ARGS__))
// On a function: the caller must not hold the capability (the function takes it itself).
#define EXCLUDES(...) SHEPHERD_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// On a function: it checks (at run time, in debug builds) that the capability is held, and from the call
// on the analysis takes it as held, exclusive / shared.
#define ASSERT_CAPABILITY(x) SHEPHERD_THREAD_ANNOTATION(assert_capability(x))
#define ASSERT_SHARED_CAPABILITY(x) SHEPHERD_THREAD_ANNOTATION(assert_shared_capability(x))
// On a function: it returns a reference to the capability.
#define RETURN_CAPABILITY(x) SHEPHERD_THREAD_ANNOTATION(lock_returned(x))
// On a function: not analysed. Every use says why.
#define NO_THREAD_SAFETY_ANALYSIS SHEPHERD_THREAD_ANNOTATION(no_thread_safety_analysis)
