/* SPDX-License-Identifier: MIT */
/* A fake libnvidia-ml.so.1 for tests: the NVML entry points rlmem watch resolves, with the
 * signatures of the real ones, answering for two canned H100s. Tests load it through
 * RLMEM_NVML_LIBRARY, so the real dlopen and dlsym path runs.
 *   GPU 0: this process (its command line is readable) and pid 4194305, which no process can have
 *          (above the kernel's PID limit, 2^22): the "not visible" path. Its used memory climbs with
 *          each query, 40 GiB + 4 GiB * (queries % 8), so a refreshing view has a history to draw.
 *   GPU 1: the parent process, with memory the driver cannot attribute (NVML_VALUE_NOT_AVAILABLE).
 * Environment:
 *   RLMEM_FAKE_NVML_INIT_FAIL=1  nvmlInit_v2 fails as it does when no driver is loaded.
 *   RLMEM_FAKE_NVML_PROCESSES=N  GPU 1 lists N more processes (more than the first request holds). */

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int nvml_return;
typedef struct fake_device* nvml_device;
struct fake_device {
  unsigned int index;
};
typedef struct {
  unsigned long long total, free, used;
} nvml_memory;
typedef struct {
  unsigned int gpu, memory;
} nvml_utilization;
typedef struct {
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id, compute_instance_id;
} nvml_process_info;

enum { success = 0, invalid_argument = 2, insufficient_size = 7, driver_not_loaded = 9 };

static const unsigned long long gib = 1ULL << 30;
static const unsigned long long total_bytes = 85520809984ULL; /* an H100 80GB HBM3: 81,559 MiB */
static struct fake_device devices[2] = {{0}, {1}};
static int initialised;
static unsigned long long memory_queries;

nvml_return nvmlInit_v2(void) {
  const char* fail = getenv("RLMEM_FAKE_NVML_INIT_FAIL");
  if (fail != NULL && strcmp(fail, "1") == 0) return driver_not_loaded;
  if (initialised++ == 0) memory_queries = 0;
  return success;
}

nvml_return nvmlShutdown(void) {
  if (initialised > 0) --initialised;
  return success;
}

const char* nvmlErrorString(nvml_return code) {
  switch (code) {
    case success: return "Success";
    case invalid_argument: return "Invalid Argument";
    case insufficient_size: return "Insufficient Size";
    case driver_not_loaded: return "Driver Not Loaded";
    default: return "Unknown Error";
  }
}

nvml_return nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = 2;
  return success;
}

nvml_return nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvml_device* device) {
  if (index >= 2) return invalid_argument;
  *device = &devices[index];
  return success;
}

nvml_return nvmlDeviceGetName(nvml_device device, char* name, unsigned int length) {
  (void)device;
  const char* text = "NVIDIA H100 80GB HBM3";
  if (length < strlen(text) + 1) return insufficient_size;
  strcpy(name, text);
  return success;
}

nvml_return nvmlDeviceGetMemoryInfo(nvml_device device, nvml_memory* memory) {
  unsigned long long used = device->index == 0 ? 40 * gib + 4 * gib * (memory_queries++ % 8) : 529ULL << 20;
  memory->total = total_bytes;
  memory->used = used;
  memory->free = total_bytes - used;
  return success;
}

nvml_return nvmlDeviceGetUtilizationRates(nvml_device device, nvml_utilization* rates) {
  rates->gpu = device->index == 0 ? 91 : 0;
  rates->memory = device->index == 0 ? 37 : 0;
  return success;
}

nvml_return nvmlDeviceGetComputeRunningProcesses_v3(nvml_device device, unsigned int* count, nvml_process_info* infos) {
  const char* extra_text = getenv("RLMEM_FAKE_NVML_PROCESSES");
  unsigned int extra = extra_text != NULL ? (unsigned int)strtoul(extra_text, NULL, 10) : 0;
  unsigned int needed = device->index == 0 ? 2 : 1 + extra;
  if (*count < needed) {
    *count = needed;
    return insufficient_size;
  }
  *count = needed;
  memset(infos, 0, needed * sizeof *infos);
  if (device->index == 0) {
    infos[0].pid = (unsigned int)getpid();
    infos[0].used_gpu_memory = 39 * gib;
    infos[1].pid = 4194305;
    infos[1].used_gpu_memory = 512ULL << 20;
    return success;
  }
  infos[0].pid = (unsigned int)getppid();
  infos[0].used_gpu_memory = ~0ULL; /* NVML_VALUE_NOT_AVAILABLE */
  for (unsigned int i = 1; i < needed; ++i) {
    infos[i].pid = 4194305 + i;
    infos[i].used_gpu_memory = 100ULL << 20;
  }
  return success;
}
