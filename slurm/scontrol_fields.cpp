#include "slurm/scontrol_fields.h"

#include <cctype>

namespace shepherd::slurm {
namespace {

bool IsKey(std::string_view k) {
  if (k.empty()) return false;
  for (char c : k)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != ':' && c != '/') return false;
  return true;
}

}  // namespace

std::vector<Fields> SplitRecords(std::string_view text, std::string_view first_key,
                                 std::string_view rest_of_line_key) {
  std::vector<Fields> records;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t eol = text.find('\n', pos);
    std::string_view line =
        text.substr(pos, eol == std::string_view::npos ? std::string_view::npos : eol - pos);
    pos = eol == std::string_view::npos ? text.size() : eol + 1;
    bool continues = false;  // false at the start of a line: a word without '=' there has no owner
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      if (i >= line.size()) break;
      std::size_t end = line.find(' ', i);
      std::string_view word =
          line.substr(i, end == std::string_view::npos ? std::string_view::npos : end - i);
      std::size_t eq = word.find('=');
      if (eq != std::string_view::npos && IsKey(word.substr(0, eq))) {
        std::string_view key = word.substr(0, eq);
        if (key == first_key) records.emplace_back();
        if (records.empty()) {  // preamble before the first record
          i = end == std::string_view::npos ? line.size() : end;
          continue;
        }
        if (!rest_of_line_key.empty() && key == rest_of_line_key) {  // free text to the end of the line
          std::string_view rest = line.substr(i + eq + 1);
          while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\r')) rest.remove_suffix(1);
          records.back().emplace_back(std::string(key), std::string(rest));
          break;
        }
        records.back().emplace_back(std::string(key), std::string(word.substr(eq + 1)));
        continues = true;
      } else if (continues && !records.empty() && !records.back().empty()) {
        records.back().back().second += " ";
        records.back().back().second += word;
      }
      i = end == std::string_view::npos ? line.size() : end;
    }
  }
  return records;
}

const std::string* FindField(const Fields& fields, std::string_view key) {
  for (const auto& [k, v] : fields)
    if (k == key) return &v;
  return nullptr;
}

}  // namespace shepherd::slurm
