// SPDX-License-Identifier: MIT
#pragma once
// Loading the real snapshots in testdata/ (recorded by PyTorch 2.11 on an H200).

#include <rlmem/snapshot/snapshot_reader.hpp>

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace rlmem::testing {

inline std::string testdata(const std::string& name) { return std::string(RLMEM_TESTDATA_DIR) + "/" + name; }

/// The snapshot testdata/snapshots/<name>, read once per test binary.
inline const snapshot& fixture(const std::string& name) {
  static std::map<std::string, snapshot> cache;
  auto found = cache.find(name);
  if (found != cache.end()) return found->second;
  auto read = read_snapshot_file(testdata("snapshots/" + name));
  if (!read.ok()) {
    ADD_FAILURE() << "reading " << name << " failed: " << describe(read.failure());
    return cache[name];
  }
  return cache.emplace(name, std::move(read).value()).first->second;
}

}  // namespace rlmem::testing
