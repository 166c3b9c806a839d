// SPDX-License-Identifier: MIT
#pragma once
// A stand-in for libc10's exception types, declared the way torch declares them (c10/util/
// Exception.h: an Error constructed from a SourceLocation and a message; OutOfMemoryError an
// Error with nothing added), so that librlmem's OOM path is tested without torch: the mangled
// names, the typeinfo and the vtable it looks up are the same.
#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <vector>

namespace c10 {

struct SourceLocation {
  const char* function;
  const char* file;
  std::uint32_t line;
};

class __attribute__((visibility("default"))) Error : public std::exception {
 public:
  Error(SourceLocation source_location, std::string msg);
  const char* what() const noexcept override;
  const std::string& msg() const { return msg_; }
  const char* function() const { return function_; }

 private:
  std::string msg_;
  std::vector<std::string> context_;
  std::shared_ptr<const std::string> backtrace_;
  std::string what_;
  const char* function_;
};

class __attribute__((visibility("default"))) OutOfMemoryError : public Error {
 public:
  using Error::Error;
};

/// Throws one, as torch's allocator does: what emits OutOfMemoryError's typeinfo and vtable in
/// the library, as the throws in libc10 do.
[[noreturn]] __attribute__((visibility("default"))) void throw_out_of_memory_for_test(const std::string& msg);

}  // namespace c10
