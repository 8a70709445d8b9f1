#include "api/problem.h"

namespace shepherd {
namespace {
const char* Title(int status) {
  switch (status) {
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 422:
      return "Unprocessable Content";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 503:
      return "Service Unavailable";
    default:
      return status >= 500 ? "Internal Server Error" : "Error";
  }
}
}  // namespace

HttpResponse JsonResponse(int status, const Json& body) {
  HttpResponse r;
  r.status = status;
  r.body = body.dump(-1, ' ', false, Json::error_handler_t::replace);
  return r;
}

HttpResponse Problem(int status, const std::string& detail, const std::vector<FieldError>& fields) {
  Json body = {{"type", "https://shepherd.dev/problems/" + std::to_string(status)},
               {"title", Title(status)},
               {"status", status},
               {"detail", detail}};
  if (!fields.empty()) {
    Json errs = Json::array();
    for (const auto& f : fields) errs.push_back({{"field", f.field}, {"message", f.message}});
    body["errors"] = std::move(errs);
  }
  HttpResponse r = JsonResponse(status, body);
  r.content_type = "application/problem+json";
  return r;
}

int HttpStatusOf(Code c) {
  switch (c) {
    case Code::kOk:
      return 200;
    case Code::kInvalidArgument:
      return 400;
    case Code::kInvalidContent:
      return 422;
    case Code::kNotFound:
      return 404;
    case Code::kConflict:
      return 409;
    case Code::kResourceExhausted:
      return 429;
    case Code::kUnavailable:
    case Code::kFailedPrecondition:
      return 503;
    case Code::kInternal:
      return 500;
  }
  return 500;
}

HttpResponse ProblemFrom(const Status& s) {
  HttpResponse r = Problem(HttpStatusOf(s.code()), s.message(), s.fields());
  if (s.code() == Code::kResourceExhausted || s.code() == Code::kUnavailable ||
      s.code() == Code::kFailedPrecondition)
    r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace shepherd
