// AgentsLauncher: jobs whose ranks Shepherd's node agents start (LaunchMode::kAgents,
// docs/agent-protocol.md). Stateless and immutable (control/launch/launcher.h): shared by every thread.
#pragma once

#include "control/launch/launcher.h"

namespace shepherd {

class AgentsLauncher final : public Launcher {
 public:
  LaunchMode mode() const override { return LaunchMode::kAgents; }
  // A restarted attempt's ranks wait for the older attempt's to stop (or stop_timeout_s); every attempt's
  // wait until the attempt is durable (a restarted daemon would find ranks it never heard of).
  LaunchGates GatesFor(int attempt) const override;
  bool AgentsStartRanks() const override { return true; }
  RankCredential Credential() const override { return RankCredential::kPerRank; }
  // Armed once every node's agent confirmed its ranks started.
  JobHealth::Launch Arming() const override { return JobHealth::Launch::kByAgents; }
};

}  // namespace shepherd
