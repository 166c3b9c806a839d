// SPDX-License-Identifier: MIT
// libFuzzer target for librlmem's C ABI: any bytes as a snapshot, under options carved from the
// first byte, and any int64 series through the leak rule. The contract checked: a status and
// exactly one of document or one-line message, and a document that is valid JSON. Any bytes also
// go through rlmem_write_file and come back whole through rlmem_read_option_file.

#include <rlmem/rlmem.h>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include <unistd.h>

namespace {

void check_inspect(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  rlmem_inspect_options options;
  rlmem_inspect_options_init(&options);
  std::uint8_t choice = data[0];
  if (choice & 1) options.device = choice >> 5;
  if (choice & 2) options.top = (choice >> 2) & 7;  // 0 is refused as an argument
  if (choice & 4) options.step_marker = (choice & 8) ? "record\\.py" : "([";
  if (choice & 16) options.category_rules = "@weights parameters\nactivations forward\n";
  char* json = nullptr;
  char* error = nullptr;
  int status = rlmem_inspect_bytes(data + 1, size - 1, &options, &json, &error);
  if ((status == RLMEM_OK) != (json != nullptr) || (status == RLMEM_OK) == (error != nullptr)) __builtin_trap();
  if (error != nullptr && std::strchr(error, '\n') != nullptr) __builtin_trap();
  if (json != nullptr && !nlohmann::json::accept(json)) __builtin_trap();
  rlmem_string_free(json);
  rlmem_string_free(error);
}

void check_leak_rule(const std::uint8_t* data, std::size_t size) {
  std::vector<std::int64_t> bytes(size / 8);
  if (!bytes.empty()) std::memcpy(bytes.data(), data, bytes.size() * 8);  // memcpy from null is undefined even for 0 bytes
  std::vector<std::uint64_t> counts(bytes.size());
  for (std::size_t i = 0; i < counts.size(); ++i) counts[i] = static_cast<std::uint64_t>(bytes[i]) & 0xff;
  rlmem_leak_verdict verdict{sizeof(rlmem_leak_verdict), 0, 0, 0, 0};
  std::size_t min_steady_steps = size > 0 ? data[size - 1] % 12 : 0;
  if (rlmem_leak_check(bytes.data(), counts.data(), bytes.size(), min_steady_steps, &verdict) != RLMEM_OK) __builtin_trap();
  if (verdict.leaking && (verdict.first_step < 1 || verdict.steps < 2 || verdict.bytes_per_step <= 0 ||
                          verdict.first_step + verdict.steps != bytes.size())) {
    __builtin_trap();
  }
}

// The file the CLI would write with `report -o` is read back by the reader of option files as it
// was given: every byte, NULs included, and the two sides agree on what failed.
void check_file_round_trip(const std::uint8_t* data, std::size_t size) {
  // A folder of its own for the run, removed with the file at exit.
  struct scratch_folder {
    std::string folder;
    std::string path;
    scratch_folder() {
      char name[] = "/tmp/rlmem-fuzz-capi-XXXXXX";
      if (::mkdtemp(name) == nullptr) __builtin_trap();
      folder = name;
      path = folder + "/option-file";
    }
    ~scratch_folder() {
      ::unlink(path.c_str());
      ::rmdir(folder.c_str());
    }
  };
  static const scratch_folder scratch;
  const std::string& path = scratch.path;
  char* error = nullptr;
  int error_number = -1;
  if (rlmem_write_file(path.c_str(), data, size, &error_number, &error) != RLMEM_OK || error != nullptr || error_number != 0) {
    __builtin_trap();
  }
  char* text = nullptr;
  std::size_t read = 0;
  if (rlmem_read_option_file(path.c_str(), &text, &read, &error) != RLMEM_OK || error != nullptr) __builtin_trap();
  if (read != size || text[read] != '\0' || (size > 0 && std::memcmp(text, data, size) != 0)) __builtin_trap();
  rlmem_string_free(text);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  check_inspect(data, size);
  check_leak_rule(data, size);
  check_file_round_trip(data, size);
  return 0;
}
