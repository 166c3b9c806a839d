// SPDX-License-Identifier: MIT
#pragma once
// Every bundled snapshot (testdata/snapshots/*.pickle*), for checks that hold on all of them.

#include "fixtures.hpp"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

namespace rlmem::testing {

/// File names under testdata/snapshots that hold a snapshot, sorted.
inline std::vector<std::string> snapshot_fixture_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(testdata("snapshots"))) {
    std::string name = entry.path().filename().string();
    if (entry.is_regular_file() && name.find(".pickle") != std::string::npos) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace rlmem::testing
