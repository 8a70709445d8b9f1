// shepherd-slurm-rank COMMAND [ARGS...]: run by srun as every task of a Shepherd step. Adds the rank's
// variables (slurm/rank_env.h) to its environment and execs COMMAND (searched in PATH). Exit 126 when the
// layout is wrong (the message goes to stderr, which srun relays), 127 when COMMAND cannot be executed.
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "slurm/rank_env.h"

extern char** environ;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: shepherd-slurm-rank COMMAND [ARGS...]\n");
    return 2;
  }
  shepherd::slurm::EnvMap env;
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    std::size_t eq = entry.find('=');
    if (eq != std::string::npos) env[entry.substr(0, eq)] = entry.substr(eq + 1);
  }
  auto rank_env = shepherd::slurm::RankEnvironment(env);
  if (!rank_env.ok()) {
    std::fprintf(stderr, "%s\n", rank_env.status().message().c_str());
    return 126;
  }
  for (const auto& [k, v] : *rank_env) ::setenv(k.c_str(), v.c_str(), 1);
  ::execvp(argv[1], argv + 1);
  std::fprintf(stderr, "shepherd-slurm-rank: exec %s: %s\n", argv[1], std::strerror(errno));
  return 127;
}
