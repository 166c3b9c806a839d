// SPDX-License-Identifier: MIT
#include "fake_c10.hpp"

namespace c10 {

Error::Error(SourceLocation source_location, std::string msg)
    : msg_(std::move(msg)), what_(msg_ + " (raised from " + source_location.function + ")"), function_(source_location.function) {}

const char* Error::what() const noexcept { return what_.c_str(); }

void throw_out_of_memory_for_test(const std::string& msg) { throw OutOfMemoryError({__func__, __FILE__, __LINE__}, msg); }

}  // namespace c10
