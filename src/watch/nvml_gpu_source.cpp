// SPDX-License-Identifier: MIT
// The gpu_source over NVML, loaded with dlopen so rlmem runs (and builds) on machines without a
// driver. The only file that loads the driver library or names an NVML function.

#include <rlmem/watch/watch.hpp>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/auxv.h>

namespace rlmem {

namespace {

// Our own declarations of the few NVML types used, with the layouts of nvml.h (API version 12;
// never copied from it). nvmlReturn_t is a C enum whose values all fit an int, so it is passed as one.
using nvml_return = int;
struct nvml_device_st;
using nvml_device = nvml_device_st*;

constexpr nvml_return nvml_success = 0;
constexpr nvml_return nvml_error_not_supported = 3;
constexpr nvml_return nvml_error_insufficient_size = 7;
constexpr unsigned long long nvml_value_not_available = ~0ULL;  // NVML_VALUE_NOT_AVAILABLE
constexpr unsigned int nvml_device_name_buffer = 96;            // NVML_DEVICE_NAME_V2_BUFFER_SIZE

struct nvml_memory {  // nvmlMemory_t (v1)
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct nvml_utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};

// nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it (drivers R510 and later):
// four fields, 24 bytes. The _v1 entry point takes only the first two, so the versions must match.
struct nvml_process_info {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
static_assert(sizeof(nvml_process_info) == 24 && offsetof(nvml_process_info, used_gpu_memory) == 8,
              "nvmlProcessInfo_t v3 layout");

// The signatures dlsym cannot check, spelled once each.
using nvml_init_fn = nvml_return (*)();
using nvml_shutdown_fn = nvml_return (*)();
using nvml_error_string_fn = const char* (*)(nvml_return);
using nvml_count_fn = nvml_return (*)(unsigned int*);
using nvml_handle_fn = nvml_return (*)(unsigned int, nvml_device*);
using nvml_name_fn = nvml_return (*)(nvml_device, char*, unsigned int);
using nvml_memory_fn = nvml_return (*)(nvml_device, nvml_memory*);
using nvml_utilization_fn = nvml_return (*)(nvml_device, nvml_utilization*);
using nvml_processes_fn = nvml_return (*)(nvml_device, unsigned int*, nvml_process_info*);

// More processes than this on one device is a driver answer not to believe.
constexpr unsigned int max_processes = 4096;

class nvml_gpu_source final : public gpu_source {
 public:
  ~nvml_gpu_source() override {
    if (initialised_) shutdown_();
    if (library_ != nullptr) dlclose(library_);
  }

  // Loads and initialises; on failure `status` says why and the object must be discarded.
  gpu_status open(const std::string& path) {
    library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library_ == nullptr) return load_failure();
    bool found = resolve(init_, "nvmlInit_v2") && resolve(shutdown_, "nvmlShutdown") && resolve(error_string_, "nvmlErrorString") &&
                 resolve(count_, "nvmlDeviceGetCount_v2") && resolve(handle_, "nvmlDeviceGetHandleByIndex_v2") &&
                 resolve(name_, "nvmlDeviceGetName") && resolve(memory_, "nvmlDeviceGetMemoryInfo") &&
                 resolve(utilization_, "nvmlDeviceGetUtilizationRates");
    if (!found) return load_failure();
    // Drivers before R510 lack the _v3 entry point: everything else still works there.
    processes_ = reinterpret_cast<nvml_processes_fn>(dlsym(library_, "nvmlDeviceGetComputeRunningProcesses_v3"));
    gpu_status status = checked(init_());
    initialised_ = status.ok();
    return status;
  }

  gpu_status device_count(std::uint32_t& count) override {
    unsigned int found = 0;
    gpu_status status = checked(count_(&found));
    count = status.ok() ? found : 0;
    return status;
  }

  gpu_status device_name(std::uint32_t index, std::string& name) override {
    nvml_device device = nullptr;
    gpu_status status = checked(handle_(index, &device));
    if (!status.ok()) return status;
    char buffer[nvml_device_name_buffer] = {};
    status = checked(name_(device, buffer, sizeof buffer));
    if (status.ok()) name.assign(buffer, strnlen(buffer, sizeof buffer));
    return status;
  }

  gpu_status device_memory(std::uint32_t index, gpu_memory& memory) override {
    nvml_device device = nullptr;
    gpu_status status = checked(handle_(index, &device));
    if (!status.ok()) return status;
    nvml_memory raw{};
    status = checked(memory_(device, &raw));
    if (status.ok()) memory = {raw.total, raw.used, raw.free};
    return status;
  }

  gpu_status device_utilisation(std::uint32_t index, std::optional<std::uint32_t>& percent) override {
    percent.reset();
    nvml_device device = nullptr;
    gpu_status status = checked(handle_(index, &device));
    if (!status.ok()) return status;
    nvml_utilization raw{};
    nvml_return code = utilization_(device, &raw);
    if (code == nvml_error_not_supported) return {};  // MIG instances and some boards do not sample it
    status = checked(code);
    if (status.ok()) percent = raw.gpu;
    return status;
  }

  gpu_status device_processes(std::uint32_t index, std::vector<gpu_process>& processes) override {
    processes.clear();
    if (processes_ == nullptr) {
      return {gpu_status::load_failed, "this NVML lacks nvmlDeviceGetComputeRunningProcesses_v3 (a driver older than R510)"};
    }
    nvml_device device = nullptr;
    gpu_status status = checked(handle_(index, &device));
    if (!status.ok()) return status;
    // Ask with room for a few; on INSUFFICIENT_SIZE NVML says how many there are, and processes
    // may start between two calls, hence the slack and the bounded retries.
    std::vector<nvml_process_info> raw(16);
    for (int attempt = 0; attempt < 4; ++attempt) {
      unsigned int count = static_cast<unsigned int>(raw.size());
      nvml_return code = processes_(device, &count, raw.data());
      if (code == nvml_error_insufficient_size && count > raw.size() && count <= max_processes) {
        raw.resize(count + 8);
        continue;
      }
      status = checked(code);
      if (!status.ok()) return status;
      for (unsigned int i = 0; i < count && i < raw.size(); ++i) {
        gpu_process process;
        process.pid = raw[i].pid;
        if (raw[i].used_gpu_memory != nvml_value_not_available) process.used_bytes = raw[i].used_gpu_memory;
        processes.push_back(process);
      }
      return status;
    }
    return checked(nvml_error_insufficient_size);
  }

 private:
  template <class Fn>
  bool resolve(Fn& function, const char* name) {
    function = reinterpret_cast<Fn>(dlsym(library_, name));
    return function != nullptr;
  }

  static gpu_status load_failure() {
    const char* text = dlerror();
    return {gpu_status::load_failed, text != nullptr ? text : "dlopen failed"};
  }

  gpu_status checked(nvml_return code) const {
    if (code == nvml_success) return {};
    const char* text = error_string_ != nullptr ? error_string_(code) : nullptr;
    return {code, text != nullptr ? text : "NVML error " + std::to_string(code)};
  }

  void* library_ = nullptr;
  bool initialised_ = false;
  nvml_init_fn init_ = nullptr;
  nvml_shutdown_fn shutdown_ = nullptr;
  nvml_error_string_fn error_string_ = nullptr;
  nvml_count_fn count_ = nullptr;
  nvml_handle_fn handle_ = nullptr;
  nvml_name_fn name_ = nullptr;
  nvml_memory_fn memory_ = nullptr;
  nvml_utilization_fn utilization_ = nullptr;
  nvml_processes_fn processes_ = nullptr;
};

}  // namespace

std::string nvml_library_path() {
  const char* chosen = std::getenv("RLMEM_NVML_LIBRARY");
  return chosen != nullptr && *chosen != '\0' ? chosen : "libnvidia-ml.so.1";
}

std::unique_ptr<gpu_source> open_nvml_gpu_source(const std::string& library, gpu_status& status) {
  // A dynamically linked program was started by the dynamic loader, whose base the kernel passes
  // as AT_BASE; a static one has none.
  if (getauxval(AT_BASE) == 0) {
    status = {gpu_status::static_program,
              "this rlmem is a statically linked binary, which cannot load the driver's NVML (" + library + ")"};
    return nullptr;
  }
  auto source = std::make_unique<nvml_gpu_source>();
  status = source->open(library);
  if (!status.ok()) return nullptr;
  return source;
}

}  // namespace rlmem
