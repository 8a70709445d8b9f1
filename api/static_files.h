// The dashboard's static files (ui/: HTML, CSS, JS) served under /ui/. Public routes: the files carry no
// data (every number the page shows comes from the API with the user's token), so a browser loads the page
// before it has a token. The file name is one path segment of letters, digits, '.', '-' and '_', not
// starting with '.', with an extension from a fixed list: anything else (../, %2f, a dot file, an unknown
// type) is 404, so no request names a file outside `ui_dir`.
#pragma once

#include <string>
#include <string_view>

#include "api/http_types.h"

namespace shepherd {

// The Content-Type for a file name the dashboard may serve; empty when its extension is not served.
std::string UiContentType(std::string_view name);

// The answer to GET /ui/<name>: the file's bytes with its Content-Type, `Cache-Control: no-cache` (the
// browser revalidates, so an upgraded daemon's files are used at once), nosniff and a Content-Security-
// Policy that lets the page load and call nothing but this daemon. 404 problem+json for a refused name or
// a missing file; 503 when `ui_dir` is empty (no dashboard installed). Reads the file: call off the I/O
// thread.
HttpResponse ServeUiFile(const std::string& ui_dir, std::string_view name);

}  // namespace shepherd
