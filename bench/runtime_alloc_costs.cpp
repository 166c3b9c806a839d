// SPDX-License-Identifier: MIT
// Where an allocation's time goes under the runtime, on the GPU: the capture query alone, the
// runtime's allocate + free, and the same through the torch entry point (C ABI, library check).
// Usage: runtime_alloc_costs [PAIRS]   (needs a CUDA device; prints one line per measurement)

#include <rlmem/device/cuda_device.hpp>
#include <rlmem/rlmem_runtime.h>
#include <rlmem/runtime/runtime.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <utility>

namespace {

template <typename Body>
double nanoseconds_each(int count, Body body) {
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < count; ++i) body(i);
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / count;
}

}  // namespace

int main(int argc, char** argv) {
  int pairs = argc > 1 ? std::atoi(argv[1]) : 100000;
  auto opened = rlmem::open_cuda_device(0);
  if (!opened.ok()) {
    std::fprintf(stderr, "runtime_alloc_costs: no CUDA device: %s\n", opened.failure().detail.c_str());
    return 2;
  }
  std::unique_ptr<rlmem::device> gpu = std::move(opened).value();
  std::printf("stream_capturing            %8.1f ns\n", nanoseconds_each(pairs, [&](int) { (void)gpu->stream_capturing(0); }));
  {
    rlmem::runtime_options options;
    options.policy.reservation_bytes = gpu->config().total_bytes;
    rlmem::runtime rt(*gpu, options);
    for (std::uint64_t size : {std::uint64_t{512}, std::uint64_t{64} << 10, std::uint64_t{1} << 20, std::uint64_t{24} << 20}) {
      auto allocate_and_free = [&] {
        auto made = rt.allocate(size, 0);
        if (made.ok()) (void)rt.free(made.value());
      };
      allocate_and_free();  // the pages, mapped once and cached after
      double each = nanoseconds_each(pairs, [&](int) { allocate_and_free(); });
      std::printf("runtime allocate+free %8llu B %8.1f ns\n", static_cast<unsigned long long>(size), each);
    }
  }
  if (rlmem_runtime_open_cuda(0, nullptr, nullptr) != RLMEM_OK) return 2;
  for (std::size_t size : {std::size_t{512}, std::size_t{1} << 20, std::size_t{32} << 20}) {
    void* warm = rlmem_torch_malloc(size, 0, nullptr);
    rlmem_torch_free(warm, size, 0, nullptr);
    double each = nanoseconds_each(pairs, [&](int) {
      void* pointer = rlmem_torch_malloc(size, 0, nullptr);
      rlmem_torch_free(pointer, size, 0, nullptr);
    });
    std::printf("torch entry malloc+free %6zu B %8.1f ns\n", size, each);
  }
  rlmem_runtime_close(0);
  return 0;
}
