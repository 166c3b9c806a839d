// SPDX-License-Identifier: MIT
// libFuzzer target for the PYTORCH_CUDA_ALLOC_CONF parser (`replay --alloc-conf`).

#include <rlmem/model/allocator_rules.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view conf(reinterpret_cast<const char*>(data), size);
  rlmem::allocator_settings settings;
  std::string message;
  if (rlmem::parse_alloc_conf(conf, settings, message)) {
    // What parsed prints back to a string that parses to the same settings.
    rlmem::allocator_settings again;
    if (!rlmem::parse_alloc_conf(rlmem::to_alloc_conf(settings), again, message) || !(again == settings)) __builtin_trap();
    (void)rlmem::round_request(size * 4099, settings);
  } else if (message.empty()) {
    __builtin_trap();
  }
  return 0;
}
