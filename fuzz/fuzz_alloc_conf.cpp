// SPDX-License-Identifier: MIT
// libFuzzer target for the PYTORCH_CUDA_ALLOC_CONF parser (`replay --alloc-conf`).

#include <rlmem/base/format.hpp>
#include <rlmem/model/allocator_rules.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view conf(reinterpret_cast<const char*>(data), size);
  auto parsed = rlmem::parse_alloc_conf(conf);
  if (parsed.ok()) {
    if (parsed.code() != rlmem::model_errc::ok) __builtin_trap();
    // What parsed prints back to a string that parses to the same settings.
    auto again = rlmem::parse_alloc_conf(rlmem::to_alloc_conf(parsed.value()));
    if (!again.ok() || !(again.value() == parsed.value())) __builtin_trap();
    (void)rlmem::round_request(size * 4099, parsed.value());
    return 0;
  }
  // The error model's contract: a named code and a line that says why, one line as printed (the
  // user's own bytes in it are escaped then).
  const std::string& line = parsed.failure().detail;
  if (parsed.code() == rlmem::model_errc::ok || rlmem::error_name(parsed.code()) == "UNKNOWN") __builtin_trap();
  if (line.empty() || rlmem::printable_text(line).find('\n') != std::string::npos) __builtin_trap();
  return 0;
}
