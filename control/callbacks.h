// Completion callbacks of the control layer. Everything in control/ runs on the one control thread; a
// `Done` is always invoked there (store completions are posted back through `Post`).
#pragma once

#include <functional>

#include "core/status.h"

namespace shepherd {

template <typename T>
using Done = std::function<void(Result<T>)>;
// Runs `fn` on the control thread, later (never inline from inside a store completion).
using Post = std::function<void(std::function<void()>)>;

}  // namespace shepherd
