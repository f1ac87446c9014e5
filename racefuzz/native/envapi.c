/* A plugin-EP library with no EP in it, so that racefuzz can call ORT's C API in-process.
 *
 * Python's onnxruntime does not expose every environment-level call an application may make
 * (CreateSharedAllocator, for one), and its extension module exports no C entry point. Any EP
 * library is handed the process's OrtApiBase when it is registered, though: the worker registers
 * this one under its own name, it creates no factory, and racefuzz/worker/env_api.py reaches the
 * API table through `racefuzz_ort_api_base()` with ctypes. Written against no ORT header: the
 * two entry points ORT looks up take only pointers here.
 */
#include <stddef.h>

static const void *g_api_base = NULL;

/* CreateEpFactories(registered_name, ort_api_base, default_logger, factories, max, num) */
void *CreateEpFactories(const char *name, const void *api_base, const void *logger, void **factories,
                        size_t max_factories, size_t *num_factories) {
  (void)name, (void)logger, (void)factories, (void)max_factories;
  g_api_base = api_base;
  *num_factories = 0;
  return NULL; /* a null OrtStatus*: success */
}

void *ReleaseEpFactory(void *factory) {
  (void)factory;
  return NULL;
}

const void *racefuzz_ort_api_base(void) { return g_api_base; }
