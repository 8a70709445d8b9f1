#include "slurm/hostlist.h"

#include <cctype>
#include <cstdint>

namespace shepherd::slurm {
namespace {

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

std::string Pad(uint64_t v, std::size_t width) {
  std::string s = std::to_string(v);
  if (s.size() < width) s.insert(0, width - s.size(), '0');
  return s;
}

// "0-3,7,09-11" → the numbers as strings, padded like their lower bound.
Status ExpandRanges(std::string_view body, std::vector<std::string>& out) {
  if (body.empty()) return InvalidArgument("hostlist: empty brackets");
  std::size_t pos = 0;
  while (pos <= body.size()) {
    std::size_t comma = body.find(',', pos);
    std::string_view item =
        body.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    std::size_t dash = item.find('-');
    std::string_view lo = item.substr(0, dash);
    std::string_view hi = dash == std::string_view::npos ? lo : item.substr(dash + 1);
    if (!AllDigits(lo) || !AllDigits(hi) || lo.size() > 18 || hi.size() > 18)
      return InvalidArgument("hostlist: bad range '" + std::string(item) + "'");
    uint64_t a = std::stoull(std::string(lo)), b = std::stoull(std::string(hi));
    if (a > b) return InvalidArgument("hostlist: descending range '" + std::string(item) + "'");
    if (b - a >= kMaxHostlistHosts) return InvalidArgument("hostlist: range too large");
    std::size_t width = lo.size() > 1 && lo[0] == '0' ? lo.size() : 0;
    for (uint64_t v = a; v <= b; ++v) {
      out.push_back(Pad(v, width));
      if (out.size() > kMaxHostlistHosts) return InvalidArgument("hostlist: too many hosts");
    }
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return Status::Ok();
}

Status ExpandTerm(std::string_view term, std::vector<std::string>& out) {
  std::vector<std::string> partial{""};
  std::size_t pos = 0;
  while (pos < term.size()) {
    std::size_t open = term.find('[', pos);
    std::string_view literal =
        term.substr(pos, open == std::string_view::npos ? std::string_view::npos : open - pos);
    if (literal.find(']') != std::string_view::npos) return InvalidArgument("hostlist: unbalanced ']'");
    for (std::string& p : partial) p += literal;
    if (open == std::string_view::npos) break;
    std::size_t close = term.find(']', open);
    if (close == std::string_view::npos) return InvalidArgument("hostlist: unbalanced '['");
    std::vector<std::string> numbers;
    if (Status s = ExpandRanges(term.substr(open + 1, close - open - 1), numbers); !s.ok()) return s;
    if (partial.size() * numbers.size() > kMaxHostlistHosts)
      return InvalidArgument("hostlist: too many hosts");
    std::vector<std::string> next;
    next.reserve(partial.size() * numbers.size());
    for (const std::string& p : partial)
      for (const std::string& n : numbers) next.push_back(p + n);
    partial = std::move(next);
    pos = close + 1;
  }
  for (std::string& p : partial) out.push_back(std::move(p));
  if (out.size() > kMaxHostlistHosts) return InvalidArgument("hostlist: too many hosts");
  return Status::Ok();
}

struct Split {
  std::string prefix;
  std::string digits;  // empty: no numeric suffix
};

Split SplitHost(const std::string& h) {
  std::size_t i = h.size();
  while (i > 0 && std::isdigit(static_cast<unsigned char>(h[i - 1]))) --i;
  if (i == h.size() || h.size() - i > 18) return {h, ""};
  return {h.substr(0, i), h.substr(i)};
}

std::size_t WidthOf(const std::string& digits) {
  return digits.size() > 1 && digits[0] == '0' ? digits.size() : 0;
}

}  // namespace

Result<std::vector<std::string>> ExpandHostlist(std::string_view expr) {
  std::vector<std::string> out;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= expr.size(); ++i) {
    char c = i < expr.size() ? expr[i] : ',';
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) return InvalidArgument("hostlist: unbalanced ']'");
    if (c == ',' && depth == 0) {
      std::string_view term = expr.substr(start, i - start);
      while (!term.empty() && std::isspace(static_cast<unsigned char>(term.front()))) term.remove_prefix(1);
      while (!term.empty() && std::isspace(static_cast<unsigned char>(term.back()))) term.remove_suffix(1);
      if (!term.empty())
        if (Status s = ExpandTerm(term, out); !s.ok()) return s;
      start = i + 1;
    }
  }
  if (depth != 0) return InvalidArgument("hostlist: unbalanced '['");
  return out;
}

std::string CompressHostlist(const std::vector<std::string>& hosts) {
  std::string out;
  std::size_t i = 0;
  while (i < hosts.size()) {
    Split first = SplitHost(hosts[i]);
    if (!out.empty()) out += ',';
    if (first.digits.empty()) {
      out += hosts[i++];
      continue;
    }
    std::size_t width = WidthOf(first.digits);
    auto fits = [&](const Split& s) {
      if (s.digits.empty() || s.prefix != first.prefix) return false;
      return width == 0 ? WidthOf(s.digits) == 0 : s.digits.size() == width;
    };
    // Collect the run of adjacent hosts of this group as (lo, hi) ranges of consecutive numbers.
    std::vector<std::pair<std::string, std::string>> ranges;
    uint64_t last = 0;
    std::size_t j = i;
    for (; j < hosts.size(); ++j) {
      Split s = SplitHost(hosts[j]);
      if (!fits(s)) break;
      uint64_t v = std::stoull(s.digits);
      if (!ranges.empty() && v == last + 1)
        ranges.back().second = s.digits;
      else
        ranges.emplace_back(s.digits, s.digits);
      last = v;
    }
    if (j - i == 1) {
      out += hosts[i];
    } else {
      out += first.prefix + "[";
      for (std::size_t r = 0; r < ranges.size(); ++r) {
        if (r) out += ',';
        out += ranges[r].first;
        if (ranges[r].second != ranges[r].first) out += "-" + ranges[r].second;
      }
      out += "]";
    }
    i = j;
  }
  return out;
}

}  // namespace shepherd::slurm
