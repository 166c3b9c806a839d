// SPDX-License-Identifier: MIT
// c10::OutOfMemoryError built from outside torch. Torch declares it as
//   class OutOfMemoryError : public Error { using Error::Error; };
// so its object is a c10::Error whose vtable is OutOfMemoryError's. libc10 exports Error's
// constructor from (SourceLocation, std::string); libc10_cuda, which throws the type, exports its
// vtable (a weak symbol of default visibility), and the vtable names its typeinfo. The exception
// is made the way a throw expression makes it: the C++ runtime's exception storage, Error's
// constructor run in it, the vtable pointer set to OutOfMemoryError's, then thrown with
// OutOfMemoryError's typeinfo, so `catch (c10::OutOfMemoryError&)` in torch's bindings matches, as
// do `catch (c10::Error&)` and `catch (std::exception&)`. The constructor is looked up by its
// mangled name, which encodes its parameter types and the std::string ABI, and the vtable's
// typeinfo is checked by name: a torch built otherwise finds nothing and the fallback is taken.
#include "torch_out_of_memory.hpp"

#include "torch_symbols.hpp"

#include <cxxabi.h>

#include <cstdint>
#include <exception>
#include <new>
#include <string_view>
#include <typeinfo>

namespace rlmem::capi {
namespace {

// c10::SourceLocation: three trivially copyable fields, passed by value like the struct itself.
struct source_location {
  const char* function;
  const char* file;
  std::uint32_t line;
};

using error_constructor = void (*)(void* self, source_location where, std::string message);

constexpr const char* kConstructor = "_ZN3c105ErrorC1ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE";
constexpr const char* kVtable = "_ZTVN3c1016OutOfMemoryErrorE";
constexpr const char* kTypeName = "N3c1016OutOfMemoryErrorE";  // what its typeinfo's name() is
// Larger than c10::Error (a vtable pointer, three strings, a vector, a shared_ptr, a lazy value
// and a pointer: under 200 bytes); the runtime's storage has no other use for the excess.
constexpr std::size_t kObjectBytes = 512;

struct c10_symbols {
  error_constructor construct = nullptr;
  std::type_info* type = nullptr;
  void* vtable_address_point = nullptr;  // what an object's first word holds
};

c10_symbols look_up() {
  c10_symbols symbols;
  void* construct = find_torch_symbol(kConstructor);
  auto vtable = static_cast<void**>(find_torch_symbol(kVtable));
  // An Itanium vtable starts with the offset to top (0 for a class with one base line) and the
  // typeinfo; an object points just past them. Anything else is not the layout this code knows.
  if (construct == nullptr || vtable == nullptr || vtable[0] != nullptr || vtable[1] == nullptr) return symbols;
  auto type = static_cast<std::type_info*>(vtable[1]);
  if (std::string_view(type->name()) != kTypeName) return symbols;
  symbols.construct = reinterpret_cast<error_constructor>(construct);
  symbols.type = type;
  symbols.vtable_address_point = vtable + 2;
  return symbols;
}

// The virtual destructor of the object's own type (std::exception is c10::Error's only base).
void destroy(void* object) { static_cast<std::exception*>(object)->~exception(); }

class out_of_device_memory : public std::bad_alloc {
 public:
  explicit out_of_device_memory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

}  // namespace

void throw_out_of_memory(const std::string& message) {
  static const c10_symbols symbols = look_up();
  if (symbols.construct == nullptr) throw out_of_device_memory(message);
  void* object = abi::__cxa_allocate_exception(kObjectBytes);
  try {
    symbols.construct(object, source_location{__func__, __FILE__, static_cast<std::uint32_t>(__LINE__)}, message);
  } catch (...) {
    abi::__cxa_free_exception(object);
    throw out_of_device_memory(message);
  }
  *static_cast<void**>(object) = symbols.vtable_address_point;
  abi::__cxa_throw(object, symbols.type, destroy);
}

}  // namespace rlmem::capi
