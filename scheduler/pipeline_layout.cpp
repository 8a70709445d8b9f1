#include "scheduler/pipeline_layout.h"

namespace shepherd {

std::vector<int> StageLayers(int layers, int pp, const std::vector<int>& given) {
  if (!given.empty()) return given;
  if (layers % pp == 0 || pp == 1) return std::vector<int>(pp, layers / pp);
  const int units = layers + 2;
  std::vector<int> stage(pp, units / pp);
  int extra = units % pp;
  // Extra units go to the middle stages first (the end stages also hold the embedding or output layer).
  for (int i = 1; i + 1 < pp && extra > 0; ++i, --extra) ++stage[i];
  if (extra > 0) {
    ++stage[0];
    --extra;
  }
  if (extra > 0) ++stage[pp - 1];
  stage[0] -= 1;
  stage[pp - 1] -= 1;
  return stage;
}

}  // namespace shepherd
