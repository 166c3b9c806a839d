// SPDX-License-Identifier: MIT
// format_bytes, the reference, against the table of cases its Python and page-script copies are
// held to as well (testdata/format/bytes_cases.json).

#include <rlmem/base/format.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>

namespace rlmem {

TEST(format_cases, format_bytes_prints_each_shared_case) {
  const std::string path = RLMEM_TESTDATA_DIR "/format/bytes_cases.json";
  std::ifstream file(path);
  ASSERT_TRUE(file) << "cannot open " << path;
  const nlohmann::json table = nlohmann::json::parse(file);
  const nlohmann::json& cases = table.at("cases");
  ASSERT_GE(cases.size(), 30u) << "expected the shared table's 30 or more cases";
  for (const nlohmann::json& one : cases) {
    const nlohmann::json& bytes = one.at("bytes");
    // A count above INT64_MAX is read as uint64; every other as int64, negatives included.
    std::string seen = bytes.is_number_unsigned() && bytes.get<std::uint64_t>() > INT64_MAX ? format_bytes(bytes.get<std::uint64_t>())
                                                                                             : format_bytes(bytes.get<std::int64_t>());
    EXPECT_EQ(seen, one.at("text").get<std::string>()) << "format_bytes(" << bytes.dump() << ") " << one.value("why", "");
  }
}

}  // namespace rlmem
