// shepherd-slurm-rank COMMAND [ARGS...]: run by srun as every task of a Shepherd step. Adds the rank's
// variables to its environment and execs COMMAND (searched in PATH): its own record of the step's rank
// table file named by SHEPHERD_SLURM_TABLE (slurm/rank_table.h; record SLURM_PROCID, checked against
// SLURMD_NODENAME), or, without that variable, the per-rank tables of an older daemon's environment
// (slurm/step_env.h). Exit 126 when the layout is wrong or the table unreadable (the message goes to
// stderr, which srun relays), 127 when COMMAND cannot be executed.
// A step started under a launch order (SHEPHERD_SLURM_ORDER, slurm/step_order.h) runs COMMAND only once the
// leader confirmed that order is still its attempt's current one (slurm/step_fence.h): exit 121 when it is
// not (a newer order of the attempt exists, or the attempt ended), 122 when no leader confirmed it within
// SHEPHERD_SLURM_ORDER_TIMEOUT_S (60 s) or the question was refused; COMMAND is not run either way.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "slurm/step_env.h"
#include "slurm/rank_table.h"
#include "slurm/step_fence.h"

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: shepherd-slurm-rank COMMAND [ARGS...]\n");
    return 2;
  }
  shepherd::Result<shepherd::slurm::EnvMap> rank_env = shepherd::slurm::EnvMap{};
  if (const char* table = std::getenv(shepherd::slurm::kRankTableVar); table && *table) {
    const char* procid = std::getenv("SLURM_PROCID");
    const char* node = std::getenv("SLURMD_NODENAME");
    char* end = nullptr;
    const long rank = procid && *procid ? std::strtol(procid, &end, 10) : -1;
    if (!procid || !*procid || *end != '\0' || rank < 0 || rank > 0x7fffffff)
      rank_env = shepherd::InvalidArgument("shepherd-slurm-rank: SLURM_PROCID is missing or not a rank");
    else
      rank_env = shepherd::slurm::ReadRankEntry(table, static_cast<int>(rank), node ? node : "");
  } else {
    shepherd::slurm::EnvMap env;
    for (char** e = environ; e && *e; ++e) {
      std::string entry(*e);
      std::size_t eq = entry.find('=');
      if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
    }
    rank_env = shepherd::slurm::RankEnvironment(env);
  }
  if (!rank_env.ok()) {
    std::fprintf(stderr, "%s\n", rank_env.status().message().c_str());
    return 126;
  }
  for (const auto& [k, v] : *rank_env) ::setenv(k.c_str(), v.c_str(), 1);
  // The fence: the rank's own token (from its table) speaks for it.
  shepherd::slurm::EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    std::size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  auto question = shepherd::slurm::OrderQuestionFrom(env);
  if (!question.ok()) {
    std::fprintf(stderr, "shepherd-slurm-rank: %s\n", question.status().message().c_str());
    return shepherd::slurm::kOrderUncheckedExit;
  }
  if (*question) {
    using shepherd::slurm::OrderVerdict;
    const shepherd::slurm::FenceOutcome out = shepherd::slurm::AskOrder(**question);
    if (out.verdict == OrderVerdict::kStale) {
      std::fprintf(stderr,
                   "shepherd-slurm-rank: launch order %lld of attempt %d is not current (%s): not running the "
                   "command\n",
                   static_cast<long long>((*question)->order), (*question)->attempt, out.detail.c_str());
      return shepherd::slurm::kStaleOrderExit;
    }
    if (out.verdict != OrderVerdict::kCurrent) {
      std::fprintf(stderr,
                   "shepherd-slurm-rank: no leader confirmed launch order %lld of attempt %d within %g s "
                   "(%s): not running the command\n",
                   static_cast<long long>((*question)->order), (*question)->attempt, (*question)->timeout_s,
                   out.detail.c_str());
      return shepherd::slurm::kOrderUncheckedExit;
    }
  }
  ::execvp(argv[1], argv + 1);
  std::fprintf(stderr, "shepherd-slurm-rank: exec %s: %s\n", argv[1], std::strerror(errno));
  return 127;
}
