#include "core/sbatch_policy.h"

#include <algorithm>

#include "core/fields.h"

namespace shepherd {

const std::vector<SbatchOptionSpec>& DefaultSbatchOptions() {
  static const std::vector<SbatchOptionSpec> kOptions = {
      // Whose budget and which queue: Slurm checks the daemon's user may use them.
      "--account=", "--partition=", "--qos=", "--reservation=", "--wckey=",
      // When and for how long.
      "--time=", "--time-min=", "--begin=", "--deadline=", "--dependency=", "--nice=",
      // Which nodes qualify and what each must offer (the node list itself is Shepherd's).
      "--constraint=", "--gres=", "--gpus-per-node=", "--mem=", "--licenses=", "--switches=", "--contiguous",
      "--exclusive",
      // Notes and mail about the allocation.
      "--comment=", "--mail-type=", "--mail-user="};
  return kOptions;
}

bool ValidSbatchOptionSpec(const std::string& spec) {
  if (spec.size() < 3 || spec.rfind("--", 0) != 0) return false;
  std::string name = spec.substr(2);
  if (name.back() == '=') name.pop_back();
  return !name.empty() && name.front() != '-' && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  });
}

std::vector<FieldError> CheckSbatchArgs(const std::vector<std::string>& args,
                                        const std::vector<SbatchOptionSpec>& allowed,
                                        const std::string& field) {
  std::vector<FieldError> errs;
  auto at = [&](std::size_t i) { return field + "[" + std::to_string(i) + "]"; };
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (HasControlCharacter(a)) {
      errs.push_back({at(i), "may not hold control characters"});
      continue;
    }
    if (a.rfind("--", 0) != 0 || a.size() == 2) {
      errs.push_back({at(i), a.size() > 1 && a[0] == '-' && a[1] != '-'
                                 ? "short options are refused: write the long name (\"--partition=gpu\")"
                                 : "must be an sbatch option (\"--name=value\")"});
      continue;
    }
    const std::size_t eq = a.find('=');
    const std::string opt = a.substr(0, eq);  // "--name"
    const bool with_value = std::find(allowed.begin(), allowed.end(), opt + "=") != allowed.end();
    const bool flag = std::find(allowed.begin(), allowed.end(), opt) != allowed.end();
    if (!with_value && !flag) {
      errs.push_back({at(i), "\"" + opt + "\" is not an sbatch option the site allows (docs/slurm.md)"});
      // "--output" "/path": the path is that option's value, refused with it, not an error of its own.
      if (eq == std::string::npos && i + 1 < args.size() && args[i + 1].rfind('-', 0) != 0) ++i;
      continue;
    }
    if (eq != std::string::npos) {
      if (!with_value) errs.push_back({at(i), "\"" + opt + "\" takes no value"});
      continue;
    }
    if (flag) continue;
    // "--name" "value": the next element is the value, whatever it looks like (sbatch reads it so).
    if (i + 1 == args.size()) {
      errs.push_back({at(i), "\"" + opt + "\" needs a value (\"" + opt + "=value\")"});
      continue;
    }
    ++i;
    if (HasControlCharacter(args[i])) errs.push_back({at(i), "may not hold control characters"});
  }
  return errs;
}

}  // namespace shepherd
