// Splitting the "Key=Value Key=Value ..." records that `scontrol show ... --oneliner` prints. Pure.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace shepherd::slurm {

// One record's fields in printed order. Values may contain spaces (`OS=Linux 6.1 #1 SMP`,
// `Dist=arbitrary task distribution`): a word without '=' continues the previous value. A key is made of
// letters, digits and `_:/` (`CPUs/Task`, `ReqB:S:C:T`).
using Fields = std::vector<std::pair<std::string, std::string>>;

// Splits `text` into records; a record starts at each field named `first_key` (e.g. "NodeName"), so both
// the one-line and the multi-line form of scontrol's output parse. Text before the first such key is
// ignored. The field named `rest_of_line_key` (if not empty) takes the rest of its line, '=' and all: a
// node's `Reason=` is free text and comes last on scontrol's line.
std::vector<Fields> SplitRecords(std::string_view text, std::string_view first_key,
                                 std::string_view rest_of_line_key = {});

// The value of `key` in `fields`, or nullptr.
const std::string* FindField(const Fields& fields, std::string_view key);

}  // namespace shepherd::slurm
