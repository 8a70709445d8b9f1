#include "api/static_files.h"

#include <fstream>
#include <iterator>
#include <utility>

#include "api/problem.h"

namespace shepherd {
namespace {

constexpr std::size_t kMaxNameChars = 64;
constexpr std::size_t kMaxFileBytes = 4u << 20;

bool SafeName(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameChars || name.front() == '.') return false;
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                    ch == '.' || ch == '-' || ch == '_';
    if (!ok) return false;
  }
  return true;
}

HttpResponse NotFound(std::string_view name) {
  return Problem(404, "no dashboard file '" + std::string(name.substr(0, kMaxNameChars)) + "'");
}

}  // namespace

std::string UiContentType(std::string_view name) {
  static const std::pair<std::string_view, std::string_view> kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
  };
  for (const auto& [ext, type] : kTypes)
    if (name.size() > ext.size() && name.substr(name.size() - ext.size()) == ext) return std::string(type);
  return "";
}

HttpResponse ServeUiFile(const std::string& ui_dir, std::string_view name) {
  if (ui_dir.empty())
    return Problem(503, "no dashboard files: start shepherdd with --ui-dir (or \"ui_dir\") naming them");
  const std::string type = UiContentType(name);
  if (!SafeName(name) || type.empty()) return NotFound(name);
  std::ifstream in(ui_dir + "/" + std::string(name), std::ios::binary);
  if (!in) return NotFound(name);
  std::string body;
  body.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (in.bad() || body.size() > kMaxFileBytes) return NotFound(name);
  HttpResponse r;
  r.content_type = type;
  r.body = std::move(body);
  r.headers = {{"Cache-Control", "no-cache"},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "no-referrer"},
               {"Content-Security-Policy",
                "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                "frame-ancestors 'none'; form-action 'none'"}};
  return r;
}

}  // namespace shepherd
