#include "slurm/nodes.h"

#include <charconv>

#include "slurm/scontrol_fields.h"

namespace shepherd::slurm {
namespace {

bool ParseNumber(std::string_view s, long long& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

std::vector<std::string> SplitList(std::string_view s) {
  std::vector<std::string> out;
  if (s.empty() || s == "(null)") return out;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t comma = s.find(',', pos);
    std::string_view item =
        s.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return out;
}

// "text [user@time]" → text, user.
void SplitReason(const std::string& full, std::string& reason, std::string& user) {
  reason = full;
  user.clear();
  if (full.empty() || full.back() != ']') return;
  std::size_t open = full.rfind(" [");
  if (open == std::string::npos) return;
  std::string inside = full.substr(open + 2, full.size() - open - 3);
  std::size_t at = inside.find('@');
  if (at == std::string::npos) return;
  user = inside.substr(0, at);
  reason = full.substr(0, open);
}

}  // namespace

Result<GresGpus> ParseGresGpus(std::string_view gres) {
  GresGpus g;
  if (gres.empty() || gres == "(null)") return g;
  // Split on commas outside parentheses: "gpu:a100:4(S:0,1)".
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= gres.size(); ++i) {
    char c = i < gres.size() ? gres[i] : ',';
    if (c == '(') ++depth;
    if (c == ')') --depth;
    if (c != ',' || depth > 0) continue;
    std::string_view entry = gres.substr(start, i - start);
    start = i + 1;
    if (std::size_t paren = entry.find('('); paren != std::string_view::npos) entry = entry.substr(0, paren);
    std::size_t c1 = entry.find(':');
    if (entry.substr(0, c1) != "gpu") continue;
    if (c1 == std::string_view::npos) return InvalidArgument("gres: gpu entry without a count");
    std::string_view rest = entry.substr(c1 + 1);
    std::size_t c2 = rest.rfind(':');
    std::string_view type = c2 == std::string_view::npos ? std::string_view() : rest.substr(0, c2);
    std::string_view count = c2 == std::string_view::npos ? rest : rest.substr(c2 + 1);
    long long n = 0;
    if (!ParseNumber(count, n) || n < 0)
      return InvalidArgument("gres: bad gpu count in '" + std::string(entry) + "'");
    g.count += static_cast<int>(n);
    if (g.model.empty() && !type.empty()) g.model = std::string(type);
  }
  return g;
}

Result<std::vector<SlurmNode>> ParseNodes(std::string_view scontrol_output) {
  std::vector<SlurmNode> nodes;
  for (const Fields& f : SplitRecords(scontrol_output, "NodeName", "Reason")) {
    SlurmNode n;
    n.name = *FindField(f, "NodeName");
    auto bad = [&](const std::string& what) { return InvalidArgument("slurm node " + n.name + ": " + what); };
    if (n.name.empty()) return InvalidArgument("slurm node: empty NodeName");
    const std::string* state = FindField(f, "State");
    if (!state) return bad("no State");
    auto parsed = ParseNodeState(*state);
    if (!parsed.ok()) return bad(parsed.status().message());
    n.state = *parsed;
    n.state_text = *state;
    if (const std::string* v = FindField(f, "NodeHostName")) n.hostname = *v;
    if (const std::string* v = FindField(f, "NodeAddr")) n.address = *v;
    if (n.address.empty()) n.address = n.hostname.empty() ? n.name : n.hostname;
    long long num = 0;
    if (const std::string* v = FindField(f, "CPUTot")) {
      if (!ParseNumber(*v, num)) return bad("bad CPUTot '" + *v + "'");
      n.cpus = static_cast<int>(num);
    }
    if (const std::string* v = FindField(f, "RealMemory")) {
      if (!ParseNumber(*v, num)) return bad("bad RealMemory '" + *v + "'");
      n.real_memory_mb = num;
    }
    if (const std::string* v = FindField(f, "Gres")) {
      auto g = ParseGresGpus(*v);
      if (!g.ok()) return bad(g.status().message());
      n.gpus = *g;
    }
    if (const std::string* v = FindField(f, "Reason")) SplitReason(*v, n.reason, n.reason_user);
    if (const std::string* v = FindField(f, "AvailableFeatures")) n.features = SplitList(*v);
    if (const std::string* v = FindField(f, "Partitions")) n.partitions = SplitList(*v);
    nodes.push_back(std::move(n));
  }
  return nodes;
}

}  // namespace shepherd::slurm
