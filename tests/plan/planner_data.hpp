// SPDX-License-Identifier: MIT
#pragma once
// Reading the planner's measured rows and configs in testdata/planner.

#include <fstream>
#include <sstream>
#include <string>

namespace rlmem::testing {

inline std::string planner_testdata(const std::string& name) { return std::string(RLMEM_TESTDATA_DIR) + "/planner/" + name; }

inline std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace rlmem::testing
