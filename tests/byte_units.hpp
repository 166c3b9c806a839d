// SPDX-License-Identifier: MIT
#pragma once
// Byte units the tests share, in the two types their figures come in: sizes as the allocators deal
// in them (unsigned) and the signed figures of torch's memory_stats and the step log. Defined once,
// so that a unity build's batch of test files sees one definition; a file takes the units it uses
// with using-declarations, which may repeat.

#include <cstdint>

namespace rlmem::testing {

namespace sizes {
inline constexpr std::uint64_t kib = std::uint64_t{1} << 10;
inline constexpr std::uint64_t mib = std::uint64_t{1} << 20;
inline constexpr std::uint64_t gib = std::uint64_t{1} << 30;
}  // namespace sizes

namespace figures {
inline constexpr std::int64_t mib = std::int64_t{1} << 20;
inline constexpr std::int64_t gib = std::int64_t{1} << 30;
}  // namespace figures

}  // namespace rlmem::testing
