// Building responses: JSON bodies and RFC 7807 problem+json errors.
#pragma once

#include <string>

#include "api/http_types.h"
#include "core/json.h"
#include "core/status.h"

namespace shepherd {

HttpResponse JsonResponse(int status, const Json& body);
// {"type", "title", "status", "detail"} plus "errors": [{"field", "message"}] when fields are given.
HttpResponse Problem(int status, const std::string& detail, const std::vector<FieldError>& fields = {});
// Maps a non-ok Status to its HTTP status (400/404/409/422/429/503/500).
HttpResponse ProblemFrom(const Status& s);
int HttpStatusOf(Code c);

}  // namespace shepherd
