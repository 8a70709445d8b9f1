#include "daemon/log_format.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "core/log_text.h"

namespace shepherd {
namespace {

class EscapingFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string_view payload(msg.payload.data(), msg.payload.size());
    if (!NeedsLogEscape(payload)) return inner_.format(msg, dest);
    const std::string escaped = EscapeLogText(payload);
    spdlog::details::log_msg copy = msg;
    copy.payload = spdlog::string_view_t(escaped.data(), escaped.size());
    inner_.format(copy, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<EscapingFormatter>(); }

 private:
  spdlog::pattern_formatter inner_;  // spdlog's default pattern
};

}  // namespace

void InstallEscapingLogFormat() {
  spdlog::set_formatter(std::make_unique<EscapingFormatter>());
}

}  // namespace shepherd
