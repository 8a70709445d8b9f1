// The dashboard's static files: names that could leave ui/ are refused, types and headers are right.
#include "api/static_files.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace shepherd {
namespace {

struct UiDir {
  UiDir() {
    char tmpl[] = "/tmp/shepherd-ui-XXXXXX";
    root = mkdtemp(tmpl);
    dir = root + "/ui";
    std::filesystem::create_directory(dir);
    std::ofstream(dir + "/index.html") << "<!doctype html>";
    std::ofstream(dir + "/app.js") << "1;";
    std::ofstream(dir + "/.hidden.js") << "secret";
    std::ofstream(root + "/outside.js") << "secret";
  }
  ~UiDir() { std::filesystem::remove_all(root); }
  std::string root, dir;
};

std::string HeaderOf(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

TEST(StaticFilesTest, ServesFilesWithTheirTypeAndRevalidation) {
  UiDir ui;
  HttpResponse js = ServeUiFile(ui.dir, "app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.body, "1;");
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(HeaderOf(js, "Cache-Control"), "no-cache");
  EXPECT_EQ(HeaderOf(js, "X-Content-Type-Options"), "nosniff");
  EXPECT_NE(HeaderOf(js, "Content-Security-Policy").find("default-src 'self'"), std::string::npos);
  EXPECT_EQ(ServeUiFile(ui.dir, "index.html").content_type, "text/html; charset=utf-8");
}

TEST(StaticFilesTest, RefusesNamesThatLeaveTheDirectoryOrAreNotServed) {
  UiDir ui;
  for (const char* name : {"../outside.js", "..", ".hidden.js", "/etc/passwd", "a/../../outside.js",
                           "app.js\\..", "index.html%00", "", "app.jsx", "app"}) {
    HttpResponse r = ServeUiFile(ui.dir, name);
    EXPECT_EQ(r.status, 404) << name;
    EXPECT_EQ(r.content_type, "application/problem+json") << name;
    EXPECT_EQ(r.body.find("secret"), std::string::npos) << name;
  }
  EXPECT_EQ(ServeUiFile(ui.dir, "missing.js").status, 404);
  EXPECT_EQ(ServeUiFile("", "app.js").status, 503);
}

}  // namespace
}  // namespace shepherd
