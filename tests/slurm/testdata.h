// Reading the captured Slurm output in tests/slurm/testdata (see its README.md).
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace shepherd::slurm::testing {

inline std::string ReadTestData(const std::string& name) {
  std::ifstream in(std::string(SLURM_TESTDATA_DIR) + "/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Non-comment lines of a .tsv file as (first column, second column).
inline std::vector<std::pair<std::string, std::string>> ReadPairs(const std::string& name) {
  std::vector<std::pair<std::string, std::string>> out;
  std::istringstream in(ReadTestData(name));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::size_t tab = line.find('\t');
    out.emplace_back(line.substr(0, tab), tab == std::string::npos ? "" : line.substr(tab + 1));
  }
  return out;
}

}  // namespace shepherd::slurm::testing
