// ParseStoreLocation (storage/etcd_store.h): --store's text to a typed location.
#include <cstdlib>
#include <string>

#include "storage/etcd_store.h"

namespace shepherd {

Result<StoreLocation> ParseStoreLocation(const std::string& text) {
  auto refuse = [&](const std::string& why) {
    return InvalidArgument("--store '" + text + "': " + why +
                           " (expected sqlite://PATH or etcd://HOST:PORT[,HOST:PORT...])");
  };
  StoreLocation loc;
  if (text.rfind("sqlite://", 0) == 0) {
    loc.kind = StoreLocation::Kind::kSqlite;
    loc.path = text.substr(9);
    if (loc.path.empty()) return refuse("no database path");
    return loc;
  }
  if (text.rfind("etcd://", 0) != 0) return refuse("unknown scheme");
  loc.kind = StoreLocation::Kind::kEtcd;
  std::string rest = text.substr(7);
  if (rest.empty()) return refuse("no endpoint");
  size_t start = 0;
  for (;;) {
    const size_t comma = rest.find(',', start);
    const std::string hp = rest.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t colon = hp.rfind(':');
    if (hp.empty() || colon == std::string::npos || colon == 0 || colon + 1 == hp.size() ||
        hp.find('/') != std::string::npos ||
        hp.find_first_not_of("0123456789", colon + 1) != std::string::npos || hp.size() - colon - 1 > 5 ||
        std::atoi(hp.c_str() + colon + 1) < 1 || std::atoi(hp.c_str() + colon + 1) > 65535)
      return refuse("endpoint '" + hp + "' is not HOST:PORT");
    loc.endpoints.push_back("http://" + hp);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return loc;
}

}  // namespace shepherd
