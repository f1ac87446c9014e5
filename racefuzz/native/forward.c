/* A plugin-EP library that forwards to another one, changing what that EP is told of its devices.
 *
 * Some real EPs offer no device on the machines everyone has: onnxruntime-ep-webgpu takes only
 * GPU hardware devices, though Dawn runs fine over a CPU Vulkan driver (lavapipe), and
 * onnxruntime-ep-openvino skips CPUs whose vendor id is not Intel's. racefuzz registers this
 * library in their place; ORT hands it its OrtApiBase, and it hands the real library one whose
 * OrtApi answers HardwareDevice_Type / HardwareDevice_VendorId differently for CPU devices. ORT
 * itself sees the real devices, and every other call goes straight through.
 *
 * Configured per registration name, from the environment (set by the target, so it is in every
 * bundle's env.json): RACEFUZZ_FORWARD_<NAME> = "library=PATH;preload=A:B;cpu_type=gpu;
 * cpu_vendor_id=0x8086", NAME the registered name upper-cased, other characters '_'. `preload`
 * libraries are opened first, RTLD_GLOBAL, so that a library the EP opens by soname (Vulkan's
 * loader) is found in racefuzz's cache without LD_LIBRARY_PATH.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnxruntime_c_api.h" /* includes the EP API too */

#define SLOTS 4        /* forwarded registrations one process may hold at once */
#define MAX_ENTRIES 4096 /* function pointers copied from ORT's table, at most */
#define MAX_FACTORIES 16

typedef OrtStatus *(*CreateFn)(const char *, const OrtApiBase *, const OrtLogger *, OrtEpFactory **,
                               size_t, size_t *);
typedef OrtStatus *(*ReleaseFn)(OrtEpFactory *);

typedef struct {
  int used;
  const OrtApiBase *real_base;
  const OrtApi *real_api;  /* the table ORT returned */
  void *copy[MAX_ENTRIES]; /* the table the forwarded EP gets */
  OrtApiBase base;
  int cpu_type; /* -1: unchanged, else an OrtHardwareDeviceType */
  int has_vendor;
  uint32_t cpu_vendor_id;
  void *handle;
  ReleaseFn release;
  OrtEpFactory *factories[MAX_FACTORIES];
  size_t num_factories;
} Slot;

static Slot g_slots[SLOTS];
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* This library is never unloaded (ORT unloads it on unregister): a real EP that stays loaded
 * (one with unique C++ symbols cannot unload) keeps the OrtApi pointer it was given, and that
 * table is ours; it must outlive every registration, as ORT's own table does. */
__attribute__((constructor)) static void pin_self(void) {
  Dl_info self;
  if (dladdr((void *)pin_self, &self) != 0 && self.dli_fname != NULL)
    dlopen(self.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
}

static OrtStatus *fail(const OrtApiBase *base, const char *what) {
  const OrtApi *api = base->GetApi(ORT_API_VERSION);
  return api != NULL ? api->CreateStatus(ORT_FAIL, what) : (OrtStatus *)(intptr_t)1;
}

/* The changed answers. Each slot needs its own functions (no closures in C): the macros below
 * stamp them out per slot. */
static OrtHardwareDeviceType device_type(int slot, const OrtHardwareDevice *device) {
  Slot *s = &g_slots[slot];
  OrtHardwareDeviceType real = s->real_api->HardwareDevice_Type(device);
  return (real == OrtHardwareDeviceType_CPU && s->cpu_type >= 0) ? (OrtHardwareDeviceType)s->cpu_type
                                                                  : real;
}

static uint32_t vendor_id(int slot, const OrtHardwareDevice *device) {
  Slot *s = &g_slots[slot];
  int cpu = s->real_api->HardwareDevice_Type(device) == OrtHardwareDeviceType_CPU;
  return (cpu && s->has_vendor) ? s->cpu_vendor_id : s->real_api->HardwareDevice_VendorId(device);
}

static void build_copy(Slot *s, const OrtApi *api) {
  /* ORT only ever appends to OrtApi, and GetApi returns one table for every version it serves:
   * copy entries while they are functions of ORT's own library, so that a table newer than the
   * headers this was built with is copied whole. Entries of the library that handed us the
   * table count too: racefuzz's EP-ABI layer in front of this one replaces a few. */
  void *const *entries = (void *const *)api;
  Dl_info first, info, giver;
  size_t n = 0;
  memset(s->copy, 0, sizeof s->copy);
  int has_giver = dladdr((void *)s->real_base->GetApi, &giver) != 0;
  if (dladdr(entries[0], &first) != 0) {
    while (n < MAX_ENTRIES && entries[n] != NULL && dladdr(entries[n], &info) != 0 &&
           (info.dli_fbase == first.dli_fbase ||
            (has_giver && info.dli_fbase == giver.dli_fbase))) {
      s->copy[n] = entries[n];
      n++;
    }
  }
  s->real_api = api;
}

#define SLOT_FUNCTIONS(i)                                                                          \
  static OrtHardwareDeviceType type_##i(const OrtHardwareDevice *d) { return device_type(i, d); } \
  static uint32_t vendor_##i(const OrtHardwareDevice *d) { return vendor_id(i, d); }              \
  static const OrtApi *ORT_API_CALL get_api_##i(uint32_t version) NO_EXCEPTION {                   \
    Slot *s = &g_slots[i];                                                                         \
    const OrtApi *api = s->real_base->GetApi(version);                                             \
    if (api == NULL) return NULL;                                                                  \
    pthread_mutex_lock(&g_lock);                                                                   \
    if (s->real_api != api) {                                                                      \
      build_copy(s, api);                                                                          \
      OrtApi *copy = (OrtApi *)s->copy;                                                            \
      copy->HardwareDevice_Type = type_##i;                                                        \
      copy->HardwareDevice_VendorId = vendor_##i;                                                  \
    }                                                                                              \
    pthread_mutex_unlock(&g_lock);                                                                 \
    return (const OrtApi *)s->copy;                                                                \
  }

SLOT_FUNCTIONS(0)
SLOT_FUNCTIONS(1)
SLOT_FUNCTIONS(2)
SLOT_FUNCTIONS(3)

static const OrtApi *(ORT_API_CALL *const g_get_api[SLOTS])(uint32_t) NO_EXCEPTION = {
    get_api_0, get_api_1, get_api_2, get_api_3};

/* The value of `key` in "k=v;k=v" into out (size n); 0 when absent. */
static int setting(const char *config, const char *key, char *out, size_t n) {
  size_t klen = strlen(key);
  const char *p = config;
  while (p != NULL && *p != '\0') {
    const char *end = strchr(p, ';');
    size_t len = end != NULL ? (size_t)(end - p) : strlen(p);
    if (len > klen && strncmp(p, key, klen) == 0 && p[klen] == '=') {
      size_t vlen = len - klen - 1;
      if (vlen >= n) vlen = n - 1;
      memcpy(out, p + klen + 1, vlen);
      out[vlen] = '\0';
      return 1;
    }
    p = end != NULL ? end + 1 : NULL;
  }
  return 0;
}

static int parse_type(const char *text) {
  if (strcmp(text, "gpu") == 0) return OrtHardwareDeviceType_GPU;
  if (strcmp(text, "npu") == 0) return OrtHardwareDeviceType_NPU;
  if (strcmp(text, "cpu") == 0) return OrtHardwareDeviceType_CPU;
  return -2;
}

static OrtStatus *configure(Slot *s, const char *name, const OrtApiBase *base, char *library,
                            size_t n) {
  char var[256] = "RACEFUZZ_FORWARD_", value[4096];
  size_t at = strlen(var);
  for (const char *c = name; *c != '\0' && at + 1 < sizeof var; c++, at++)
    var[at] = isalnum((unsigned char)*c) ? (char)toupper((unsigned char)*c) : '_';
  var[at] = '\0';
  const char *config = getenv(var);
  if (config == NULL) return fail(base, "racefuzz forward: no configuration in the environment");
  if (!setting(config, "library", library, n))
    return fail(base, "racefuzz forward: its configuration names no library");
  s->cpu_type = -1;
  if (setting(config, "cpu_type", value, sizeof value)) {
    s->cpu_type = parse_type(value);
    if (s->cpu_type == -2) return fail(base, "racefuzz forward: cpu_type is not cpu, gpu or npu");
  }
  s->has_vendor = setting(config, "cpu_vendor_id", value, sizeof value);
  if (s->has_vendor) s->cpu_vendor_id = (uint32_t)strtoul(value, NULL, 0);
  if (setting(config, "preload", value, sizeof value)) {
    char *rest = NULL;
    for (char *part = strtok_r(value, ":", &rest); part != NULL; part = strtok_r(NULL, ":", &rest))
      if (dlopen(part, RTLD_NOW | RTLD_GLOBAL) == NULL)
        return fail(base, "racefuzz forward: a preload library does not open");
  }
  return NULL;
}

OrtStatus *CreateEpFactories(const char *name, const OrtApiBase *base, const OrtLogger *logger,
                             OrtEpFactory **factories, size_t max_factories, size_t *num_factories) {
  int slot = -1;
  pthread_mutex_lock(&g_lock);
  for (int i = 0; i < SLOTS && slot < 0; i++)
    if (!g_slots[i].used) slot = i;
  if (slot >= 0) {
    /* The copied table stays: an EP that cached its OrtApi pointer in a static (the real
     * library is never closed) must not see it cleared by a later registration. */
    Slot *s = &g_slots[slot];
    s->used = 1;
    s->handle = NULL;
    s->release = NULL;
    s->num_factories = 0;
    memset(s->factories, 0, sizeof s->factories);
  }
  pthread_mutex_unlock(&g_lock);
  if (slot < 0) return fail(base, "racefuzz forward: too many forwarded registrations");
  Slot *s = &g_slots[slot];
  char library[4096];
  OrtStatus *status = configure(s, name, base, library, sizeof library);
  if (status == NULL) {
    s->handle = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    CreateFn create = s->handle != NULL ? (CreateFn)dlsym(s->handle, "CreateEpFactories") : NULL;
    s->release = s->handle != NULL ? (ReleaseFn)dlsym(s->handle, "ReleaseEpFactory") : NULL;
    if (create == NULL || s->release == NULL) {
      status = fail(base, s->handle == NULL ? dlerror() : "racefuzz forward: not an EP library");
    } else {
      s->real_base = base;
      s->base.GetApi = g_get_api[slot];
      s->base.GetVersionString = base->GetVersionString;
      status = create(name, &s->base, logger, factories, max_factories, num_factories);
      if (status == NULL) {
        s->num_factories = *num_factories < MAX_FACTORIES ? *num_factories : MAX_FACTORIES;
        memcpy(s->factories, factories, s->num_factories * sizeof *factories);
      }
    }
  }
  if (status != NULL) {
    if (s->handle != NULL) dlclose(s->handle);
    s->used = 0;
  }
  return status;
}

OrtStatus *ReleaseEpFactory(OrtEpFactory *factory) {
  for (int i = 0; i < SLOTS; i++) {
    Slot *s = &g_slots[i];
    for (size_t f = 0; s->used && f < s->num_factories; f++) {
      if (s->factories[f] != factory) continue;
      OrtStatus *status = s->release(factory);
      s->factories[f] = NULL;
      size_t live = 0;
      for (size_t g = 0; g < s->num_factories; g++) live += s->factories[g] != NULL;
      if (live == 0) { /* as ORT would on unregistering it: the real library may unload */
        dlclose(s->handle);
        s->handle = NULL;
        s->used = 0;
      }
      return status;
    }
  }
  return NULL;
}
