// SPDX-License-Identifier: MIT
#pragma once
// The pickle machine's value stack: a vector whose push is always inlined, its limit checked
// only when it grows.

#include "value.hpp"

#include <cstdint>
#include <cstring>
#include <memory>

namespace rlmem::detail {

// The machine's value stack: a vector whose push is always inlined (about 60% of opcodes push),
// with growth kept out of the hot path. Its limit is checked only when it grows: a push past
// the limit raises `over_limit()` and asks the machine to look at the next opcode boundary.
class value_stack {
 public:
  value_stack(std::uint64_t max_values, std::uint32_t& poll_countdown)
      : max_values_(max_values), poll_countdown_(poll_countdown) {}

  [[gnu::always_inline]] void push_back(value item) {
    if (size_ == capacity_) [[unlikely]] grow();
    data_[size_++] = item;
  }
  value& back() { return data_[size_ - 1]; }
  void pop_back() { --size_; }
  std::size_t size() const { return size_; }
  void resize(std::size_t size) { size_ = size; }  // only ever shrinks
  value* data() { return data_.get(); }
  value& operator[](std::size_t index) { return data_[index]; }
  bool over_limit() const { return over_limit_; }

 private:
  [[gnu::noinline]] void grow() {
    if (size_ >= max_values_) {
      poll_countdown_ = 1;  // the machine fails at the next opcode boundary
      if (over_limit_) {
        // Only pushes run until then (a run of LONG_BINGET): overwrite the top, allocate nothing.
        --size_;
        return;
      }
      over_limit_ = true;
    }
    std::size_t capacity = capacity_ == 0 ? 4096 : capacity_ * 2;
    if (capacity_ < max_values_ && capacity > max_values_) capacity = static_cast<std::size_t>(max_values_);
    auto bigger = std::make_unique<value[]>(capacity);
    if (size_ > 0) std::memcpy(bigger.get(), data_.get(), size_ * sizeof(value));
    data_ = std::move(bigger);
    capacity_ = capacity;
  }
  std::unique_ptr<value[]> data_;
  std::size_t size_ = 0;
  std::size_t capacity_ = 0;
  std::uint64_t max_values_;
  std::uint32_t& poll_countdown_;
  bool over_limit_ = false;
};

}  // namespace rlmem::detail
