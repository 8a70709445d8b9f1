// shepherdd agent: placeholder until the node agent lands (agent/).
#include <iostream>

#include "daemon/commands.h"

namespace shepherd {

int RunAgent(int, char**) {
  std::cerr << "shepherdd agent: the node agent is not built yet\n";
  return 2;
}

}  // namespace shepherd
