// SPDX-License-Identifier: MIT
// Torch's symbols, found where the process has them.

#include "torch_symbols.hpp"

#include <dlfcn.h>

#include <initializer_list>

namespace rlmem::capi {

void* find_torch_symbol(const char* name) noexcept {
  if (void* found = dlsym(RTLD_DEFAULT, name)) return found;
  for (const char* library_name : {"libc10.so", "libc10_cuda.so", "libtorch_cuda.so"}) {
    void* library = dlopen(library_name, RTLD_NOW | RTLD_NOLOAD);
    if (library == nullptr) continue;
    void* found = dlsym(library, name);
    dlclose(library);  // RTLD_NOLOAD took a reference; the library stays loaded
    if (found != nullptr) return found;
  }
  return nullptr;
}

}  // namespace rlmem::capi
