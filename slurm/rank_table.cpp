#include "slurm/rank_table.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <unordered_map>

namespace shepherd::slurm {
namespace {

constexpr std::string_view kMagic = "shepherd-rank-table v1 ";
constexpr std::size_t kMaxHeader = 64 * 1024;      // a header line is the keys: a few hundred bytes
constexpr std::size_t kMaxRecord = 64 * 1024;      // one rank's variables
constexpr std::size_t kMaxRanks = 16 * 1024 * 1024;

bool BadValue(std::string_view v) {
  return v.find_first_of(std::string_view("\t\n\0", 3)) != std::string_view::npos;
}

bool BadKey(std::string_view k) {
  if (k.empty()) return true;
  for (char c : k)
    if (c == ',' || c == '=' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return true;
  return false;
}

bool ToSize(std::string_view s, std::size_t& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && !s.empty();
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    std::size_t c = s.find(sep);
    out.push_back(s.substr(0, c));
    if (c == std::string_view::npos) return out;
    s.remove_prefix(c + 1);
  }
}

// pread until `n` bytes or the end of the file.
bool ReadAt(int fd, char* buf, std::size_t n, off_t at, std::size_t& got) {
  got = 0;
  while (got < n) {
    ssize_t r = ::pread(fd, buf + got, n - got, at + static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return false;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

}  // namespace

Result<std::string> EncodeRankTable(const Placement& placement, const std::vector<EnvMap>& per_rank) {
  const std::size_t n = placement.ranks.size();
  if (per_rank.size() != n)
    return InvalidArgument("rank table: " + std::to_string(per_rank.size()) + " variable maps for " +
                           std::to_string(n) + " ranks");
  std::vector<std::string> keys;
  if (n > 0)
    for (const auto& [k, v] : per_rank[0]) {
      if (BadKey(k)) return InvalidArgument("rank table: variable name '" + k + "' is not allowed");
      keys.push_back(k);
    }
  std::string header(kMagic);
  header += "ranks=" + std::to_string(n) + " record=";
  std::string key_list;
  for (const std::string& k : keys) key_list += (key_list.empty() ? "" : ",") + k;
  // First pass: validate and measure the longest record.
  std::size_t longest = 0;
  for (std::size_t r = 0; r < n; ++r) {
    const RankSlot& slot = placement.ranks[r];
    if (slot.rank != static_cast<int>(r))
      return InvalidArgument("rank table: placement.ranks[" + std::to_string(r) + "] is rank " +
                             std::to_string(slot.rank));
    if (slot.node.empty() || BadValue(slot.node))
      return InvalidArgument("rank table: node name of rank " + std::to_string(r) + " is empty or not allowed");
    if (per_rank[r].size() != keys.size())
      return InvalidArgument("rank table: rank " + std::to_string(r) + " has other variables than rank 0");
    std::size_t len = slot.node.size() + 2;  // node, the closing '\t' and '\n'
    for (const std::string& k : keys) {
      auto it = per_rank[r].find(k);
      if (it == per_rank[r].end())
        return InvalidArgument("rank table: rank " + std::to_string(r) + " has no " + k);
      if (BadValue(it->second))
        return InvalidArgument("rank table: " + k + " of rank " + std::to_string(r) +
                               " holds a tab, a line feed or a NUL");
      len += it->second.size() + 1;
    }
    longest = std::max(longest, len);
  }
  header += std::to_string(longest) + " keys=" + key_list + "\n";
  std::string out;
  out.reserve(header.size() + longest * n);
  out += header;
  for (std::size_t r = 0; r < n; ++r) {
    const std::size_t start = out.size();
    out += placement.ranks[r].node;
    for (const std::string& k : keys) out += '\t' + per_rank[r].at(k);
    out += '\t';
    out.append(longest - 1 - (out.size() - start), ' ');
    out += '\n';
  }
  return out;
}

std::vector<EnvMap> DeriveRankEnv(const Placement& placement) {
  const std::size_t n = placement.ranks.size();
  std::unordered_map<std::string, int> on_node;  // ranks placed on each node so far, then in all
  std::vector<int> local(n);
  for (std::size_t r = 0; r < n; ++r) local[r] = on_node[placement.ranks[r].node]++;
  std::vector<EnvMap> out(n);
  for (std::size_t r = 0; r < n; ++r) {
    const RankSlot& s = placement.ranks[r];
    out[r] = EnvMap{
        {"RANK", std::to_string(r)},
        {"SHEPHERD_RANK", std::to_string(r)},
        {"WORLD_SIZE", std::to_string(n)},
        {"LOCAL_RANK", std::to_string(local[r])},
        {"LOCAL_WORLD_SIZE", std::to_string(on_node[s.node])},
        {"CUDA_VISIBLE_DEVICES", std::to_string(s.gpu)},
        {"SHEPHERD_RANK_COORDS", std::to_string(s.tp) + "," + std::to_string(s.pp) + "," + std::to_string(s.dp)}};
  }
  return out;
}

Result<RankTableHeader> ParseRankTableHeader(std::string_view line) {
  if (line.substr(0, kMagic.size()) != kMagic)
    return InvalidArgument("rank table: not a table this shepherd-slurm-rank reads (header '" +
                           std::string(line.substr(0, 40)) + "')");
  line.remove_prefix(kMagic.size());
  std::vector<std::string_view> parts = Split(line, ' ');
  if (parts.size() != 3 || parts[0].substr(0, 6) != "ranks=" || parts[1].substr(0, 7) != "record=" ||
      parts[2].substr(0, 5) != "keys=")
    return InvalidArgument("rank table: malformed header");
  RankTableHeader h;
  if (!ToSize(parts[0].substr(6), h.ranks) || !ToSize(parts[1].substr(7), h.record_len) ||
      h.ranks > kMaxRanks || h.record_len < 2 || h.record_len > kMaxRecord)
    return InvalidArgument("rank table: malformed header (ranks or record size)");
  std::string_view keys = parts[2].substr(5);
  if (!keys.empty())
    for (std::string_view k : Split(keys, ',')) {
      if (BadKey(k)) return InvalidArgument("rank table: malformed header (variable names)");
      h.keys.emplace_back(k);
    }
  return h;
}

Result<EnvMap> ParseRankRecord(const RankTableHeader& header, std::string_view record, int rank,
                               const std::string& node) {
  if (record.size() != header.record_len || record.back() != '\n')
    return InvalidArgument("rank table: record of rank " + std::to_string(rank) + " is malformed");
  record.remove_suffix(1);
  std::vector<std::string_view> fields = Split(record, '\t');
  // node, one value per key, then the padding (spaces only).
  if (fields.size() != header.keys.size() + 2 || fields.back().find_first_not_of(' ') != std::string_view::npos)
    return InvalidArgument("rank table: record of rank " + std::to_string(rank) + " is malformed");
  if (fields[0] != node)
    return Conflict("shepherd-slurm-rank: rank " + std::to_string(rank) + " was placed on " +
                    std::string(fields[0]) + " but runs on " + (node.empty() ? "an unknown node" : node));
  EnvMap out;
  for (std::size_t i = 0; i < header.keys.size(); ++i) out[header.keys[i]] = std::string(fields[i + 1]);
  return out;
}

Status WriteRankTable(const std::string& path, const std::string& contents) {
  const std::string tmp = path + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return Internal("rank table: cannot create " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < contents.size()) {
    ssize_t w = ::write(fd, contents.data() + done, contents.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      const std::string err = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      return Internal("rank table: cannot write " + tmp + ": " + err);
    }
    done += static_cast<std::size_t>(w);
  }
  if (::close(fd) != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string err = std::strerror(errno);
    ::unlink(tmp.c_str());
    return Internal("rank table: cannot write " + path + ": " + err);
  }
  return Status::Ok();
}

Result<EnvMap> ReadRankEntry(const std::string& path, int rank, const std::string& node) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return NotFound("shepherd-slurm-rank: cannot open the rank table " + path + ": " + std::strerror(errno));
  // Written by the daemon as the user the step runs as: a table another user left at that path (the nodes'
  // /tmp is shared) is never believed.
  struct stat st{};
  if (::fstat(fd, &st) != 0 || st.st_uid != ::geteuid()) {
    ::close(fd);
    return FailedPrecondition("shepherd-slurm-rank: the rank table " + path + " belongs to another user");
  }
  std::string head(4096, '\0');
  std::size_t got = 0;
  std::size_t eol = std::string::npos;
  while (eol == std::string::npos && head.size() <= kMaxHeader) {  // the header line, however long
    std::size_t have = 0;
    if (!ReadAt(fd, head.data() + got, head.size() - got, static_cast<off_t>(got), have)) break;
    eol = std::string_view(head.data(), got + have).find('\n');
    got += have;
    if (eol != std::string::npos || have == 0) break;
    head.resize(head.size() * 2);
  }
  if (eol == std::string::npos) {
    ::close(fd);
    return InvalidArgument("shepherd-slurm-rank: " + path + " has no header line");
  }
  auto header = ParseRankTableHeader(std::string_view(head.data(), eol));
  if (!header.ok()) {
    ::close(fd);
    return header.status();
  }
  if (rank < 0 || static_cast<std::size_t>(rank) >= header->ranks) {
    ::close(fd);
    return InvalidArgument("shepherd-slurm-rank: SLURM_PROCID " + std::to_string(rank) +
                           " outside the table of " + std::to_string(header->ranks) + " ranks");
  }
  std::string record(header->record_len, '\0');
  const off_t at = static_cast<off_t>(eol + 1 + static_cast<std::size_t>(rank) * header->record_len);
  std::size_t have = 0;
  const bool ok = ReadAt(fd, record.data(), record.size(), at, have);
  ::close(fd);
  if (!ok || have != record.size())
    return InvalidArgument("shepherd-slurm-rank: " + path + " ends before the record of rank " +
                           std::to_string(rank));
  return ParseRankRecord(*header, record, rank, node);
}

}  // namespace shepherd::slurm
