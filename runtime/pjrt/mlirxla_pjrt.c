/* The PJRT C API over the mlirxla runtime: what JAX dlopens for `JAX_PLATFORMS=mlirxla`.
 *
 * The library does not link libpython: it runs inside the Python process that loaded it,
 * takes the GIL around every call into Python (jaxlib calls Compile on a worker thread with
 * the GIL released) and calls `mlirxla.runtime.pjrt.bridge`, which compiles and executes.
 * What needs no Python stays here: devices and memories (N virtual CPU devices), events
 * (execution is synchronous: only created events and zero-copy host transfers wait),
 * errors, what each device's live buffers hold, and the shapes and element types of buffers
 * and executables, cached so that the pointers handed out stay valid for the object's
 * lifetime.
 *
 * Extensions (`extension_start`): the PJRT profiler extension, through which jax's profiler
 * (jax.profiler.trace) collects the plugin's events (`mlirxla/report/xspace.py`), and the
 * layouts extension, through which jaxlib reads an executable's layouts without converting
 * its program to HLO.
 *
 * Version handshake: the table reports the PJRT_API_MAJOR/MINOR of the header it was built
 * against; every out field is written only when it lies within the caller's struct_size;
 * every function pointer is set, those not implemented answering UNIMPLEMENTED with their
 * name (the list comes from the header itself, `pjrt_api_functions.inc`).
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

#include "xla/pjrt/c/pjrt_c_api.h"

#define EXPORT __attribute__((visibility("default")))
#define STRINGIFY(x) #x
#define TO_STRING(x) STRINGIFY(x)
/* Whether the caller's struct (of `args->struct_size` bytes) has room for `field`. */
#define HAS_FIELD(args, field) \
  (offsetof(__typeof__(*(args)), field) + sizeof((args)->field) <= (args)->struct_size)
#define SET(args, field, value)          \
  do {                                   \
    if (HAS_FIELD(args, field)) (args)->field = (value); \
  } while (0)

/* An input or out field the caller's (older) struct lacks: a clear error, not a stray write. */
#define REQUIRE_FIELD(args, field, function)                                                              \
  do {                                                                                                    \
    if (!HAS_FIELD(args, field))                                                                          \
      return new_error(PJRT_Error_Code_INVALID_ARGUMENT,                                                  \
                       "mlirxla: " function " got a %zu-byte argument struct, too small for its '" #field \
                       "' field: the caller's PJRT C API is older than this plugin supports",            \
                       (size_t)(args)->struct_size);                                                      \
  } while (0)

static const char kPlatformName[] = "mlirxla";
/* The memories of every device, as XLA:CPU has them: all host memory, so one array serves any
 * kind; a buffer and an executable's output only say which kind they are in (jax's host
 * offloading places arrays in `pinned_host`). The first is the default. */
static const char* const kMemoryKinds[] = {"device", "pinned_host", "unpinned_host"};
#define MEMORY_KIND_COUNT (sizeof(kMemoryKinds) / sizeof(kMemoryKinds[0]))

/* ---------------------------------------------------------------- errors */

struct PJRT_Error {
  PJRT_Error_Code code;
  char* message;
};

static PJRT_Error* new_error(PJRT_Error_Code code, const char* format, ...) {
  PJRT_Error* error = malloc(sizeof(PJRT_Error));
  va_list arguments;
  va_start(arguments, format);
  int size = vsnprintf(NULL, 0, format, arguments);
  va_end(arguments);
  error->code = code;
  error->message = malloc((size_t)size + 1);
  va_start(arguments, format);
  vsnprintf(error->message, (size_t)size + 1, format, arguments);
  va_end(arguments);
  return error;
}

static void error_destroy(PJRT_Error_Destroy_Args* args) {
  if (args->error == NULL) return;
  free(args->error->message);
  free(args->error);
}

static void error_message(PJRT_Error_Message_Args* args) {
  SET(args, message, args->error->message);
  SET(args, message_size, strlen(args->error->message));
}

static PJRT_Error* error_get_code(PJRT_Error_GetCode_Args* args) {
  SET(args, code, args->error->code);
  return NULL;
}

/* ---------------------------------------------------------------- Python */

static PyObject* bridge_module = NULL;
static PyObject* bridge_functions = NULL; /* name -> function, looked up once */

/* Shutdown: jaxlib threads may destroy executables or call in while the main thread finalizes
 * Python. A thread that waits for the GIL then is ended by pthread_exit, and the forced unwind
 * through jaxlib's noexcept destructors aborts the process. So an atexit hook (which runs
 * before finalization starts) raises `shutting_down` and gives up the GIL until every thread
 * counted in `threads_in_python` has left; afterwards callers get an error, and objects they
 * would release are leaked. Sequentially consistent atomics make the count-then-check in
 * `enter_python` and the flag-then-wait in the hook see each other. */
static atomic_bool shutting_down = false;
static atomic_int threads_in_python = 0;
enum { SHUTDOWN_WAIT_MS = 10000 };

static bool python_alive(void) { return Py_IsInitialized() && !_Py_IsFinalizing(); }

static bool enter_python_state(PyGILState_STATE* state) {
  atomic_fetch_add(&threads_in_python, 1);
  if (atomic_load(&shutting_down) || !python_alive()) {
    atomic_fetch_sub(&threads_in_python, 1);
    return false;
  }
  *state = PyGILState_Ensure();
  return true;
}

static void leave_python(PyGILState_STATE state) {
  PyGILState_Release(state);
  atomic_fetch_sub(&threads_in_python, 1);
}

/* The GIL, or an error when the interpreter is going away (a plugin call during shutdown). */
static PJRT_Error* enter_python(PyGILState_STATE* state) {
  if (!enter_python_state(state))
    return new_error(PJRT_Error_Code_FAILED_PRECONDITION, "mlirxla: the Python interpreter is shutting down");
  return NULL;
}

static PyObject* wait_for_threads_at_exit(PyObject* self, PyObject* unused) {
  (void)self;
  (void)unused;
  atomic_store(&shutting_down, true);
  Py_BEGIN_ALLOW_THREADS
  for (int waited_ms = 0; waited_ms < SHUTDOWN_WAIT_MS; ++waited_ms) {
    if (atomic_load(&threads_in_python) == 0) break;
    usleep(1000);
  }
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

static PyMethodDef wait_for_threads_at_exit_method = {
    "mlirxla_pjrt_wait_for_threads_at_exit", wait_for_threads_at_exit, METH_NOARGS,
    "Stops plugin calls into Python and waits for those under way (registered with atexit)."};

/* Called with the GIL held, once, when the bridge is first imported. */
static int register_exit_hook(void) {
  PyObject* hook = PyCFunction_New(&wait_for_threads_at_exit_method, NULL);
  PyObject* atexit_module = PyImport_ImportModule("atexit");
  PyObject* registered = hook && atexit_module ? PyObject_CallMethod(atexit_module, "register", "O", hook) : NULL;
  Py_XDECREF(registered);
  Py_XDECREF(atexit_module);
  Py_XDECREF(hook);
  return registered ? 0 : -1;
}

/* The pending Python exception as a PJRT error (our own errors keep their one-line text). */
static PJRT_Error* python_error(void) {
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  PyErr_NormalizeException(&type, &value, &traceback);
  PJRT_Error_Code code = PJRT_Error_Code_INTERNAL;
  const char* type_name = type ? ((PyTypeObject*)type)->tp_name : "error";
  if (type && strcmp(type_name, "MlirxlaError") == 0) code = PJRT_Error_Code_INVALID_ARGUMENT;
  PyObject* text = value ? PyObject_Str(value) : NULL;
  const char* message = text ? PyUnicode_AsUTF8(text) : NULL;
  PJRT_Error* error = code == PJRT_Error_Code_INVALID_ARGUMENT
                          ? new_error(code, "%s", message ? message : "unknown error")
                          : new_error(code, "mlirxla: %s: %s", type_name, message ? message : "");
  PyErr_Clear();
  Py_XDECREF(text);
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(traceback);
  return error;
}

/* bridge.<name>(*arguments) with the GIL held; NULL (with a Python exception) on failure. */
static PyObject* call_bridge(const char* name, const char* format, ...) {
  if (bridge_module == NULL) {
    bridge_module = PyImport_ImportModule("mlirxla.runtime.pjrt.bridge");
    bridge_functions = PyDict_New();
    if (bridge_module == NULL || bridge_functions == NULL || register_exit_hook() != 0) return NULL;
  }
  PyObject* function = PyDict_GetItemString(bridge_functions, name); /* borrowed */
  if (function == NULL) {
    function = PyObject_GetAttrString(bridge_module, name);
    if (function == NULL || PyDict_SetItemString(bridge_functions, name, function) != 0) return NULL;
  } else {
    Py_INCREF(function);
  }
  va_list arguments;
  va_start(arguments, format);
  PyObject* tuple = Py_VaBuildValue(format, arguments);
  va_end(arguments);
  PyObject* result = NULL;
  if (tuple != NULL) {
    result = PyObject_CallObject(function, tuple);
    Py_DECREF(tuple);
  }
  Py_DECREF(function);
  return result;
}

static void release_object(PyObject* object) {
  PyGILState_STATE state;
  if (object == NULL || !enter_python_state(&state)) return; /* at shutdown: leaked, not crashed */
  Py_DECREF(object);
  leave_python(state);
}

/* ------------------------------------------------------------ element types */

typedef struct {
  PJRT_Buffer_Type type;
  const char* name; /* numpy's (or ml_dtypes') name for it */
} ElementType;

static const ElementType kElementTypes[] = {
    {PJRT_Buffer_Type_PRED, "bool"},         {PJRT_Buffer_Type_S8, "int8"},
    {PJRT_Buffer_Type_S16, "int16"},         {PJRT_Buffer_Type_S32, "int32"},
    {PJRT_Buffer_Type_S64, "int64"},         {PJRT_Buffer_Type_U8, "uint8"},
    {PJRT_Buffer_Type_U16, "uint16"},        {PJRT_Buffer_Type_U32, "uint32"},
    {PJRT_Buffer_Type_U64, "uint64"},        {PJRT_Buffer_Type_F16, "float16"},
    {PJRT_Buffer_Type_F32, "float32"},       {PJRT_Buffer_Type_F64, "float64"},
    {PJRT_Buffer_Type_BF16, "bfloat16"},     {PJRT_Buffer_Type_C64, "complex64"},
    {PJRT_Buffer_Type_C128, "complex128"},   {PJRT_Buffer_Type_F8E5M2, "float8_e5m2"},
    {PJRT_Buffer_Type_F8E4M3FN, "float8_e4m3fn"}, {PJRT_Buffer_Type_F8E4M3B11FNUZ, "float8_e4m3b11fnuz"},
    {PJRT_Buffer_Type_F8E5M2FNUZ, "float8_e5m2fnuz"}, {PJRT_Buffer_Type_F8E4M3FNUZ, "float8_e4m3fnuz"},
    {PJRT_Buffer_Type_S4, "int4"},           {PJRT_Buffer_Type_U4, "uint4"},
    {PJRT_Buffer_Type_S2, "int2"},           {PJRT_Buffer_Type_U2, "uint2"},
    {PJRT_Buffer_Type_F8E4M3, "float8_e4m3"}, {PJRT_Buffer_Type_F8E3M4, "float8_e3m4"},
    {PJRT_Buffer_Type_F8E8M0FNU, "float8_e8m0fnu"}, {PJRT_Buffer_Type_F4E2M1FN, "float4_e2m1fn"},
};
#define ELEMENT_TYPE_COUNT (sizeof(kElementTypes) / sizeof(kElementTypes[0]))

static const char* element_type_name(PJRT_Buffer_Type type) {
  for (size_t i = 0; i < ELEMENT_TYPE_COUNT; ++i)
    if (kElementTypes[i].type == type) return kElementTypes[i].name;
  return NULL;
}

static PJRT_Buffer_Type element_type_of(const char* name) {
  for (size_t i = 0; i < ELEMENT_TYPE_COUNT; ++i)
    if (strcmp(kElementTypes[i].name, name) == 0) return kElementTypes[i].type;
  return PJRT_Buffer_Type_INVALID;
}

static int memory_kind_id_of(const char* kind) {
  for (size_t k = 0; kind && k < MEMORY_KIND_COUNT; ++k)
    if (strcmp(kMemoryKinds[k], kind) == 0) return (int)k;
  return -1;
}

/* ------------------------------------------------------ devices, memories */

struct PJRT_DeviceDescription {
  int id;
  int process_index;
  char kind[32];
  char debug_string[64];
  char to_string[64];
};

struct PJRT_Memory {
  int id;
  int kind_id; /* its index in kMemoryKinds */
  PJRT_Device* device;
  char debug_string[64];
  char to_string[64];
};

/* What a device's live buffers hold (PJRT_Device_MemoryStats), counted as buffers take and let
 * go of their arrays, from any thread. */
typedef struct {
  int64_t bytes_in_use;
  int64_t peak_bytes_in_use;
  int64_t allocations; /* buffers ever made on the device */
  int64_t largest_allocation;
} MemoryUsage;

struct PJRT_Device {
  PJRT_DeviceDescription description;
  PJRT_Memory spaces[MEMORY_KIND_COUNT];
  PJRT_Memory* memories[MEMORY_KIND_COUNT];
  PJRT_Device* self[1]; /* the one device this device's memory is addressable by */
  int local_hardware_id;  /* its index among this process's devices; -1: another process's */
  MemoryUsage usage;
};

/* Every process's devices (jax.distributed.initialize: process p holds ids p*L .. p*L+L-1),
 * of which this process's are addressable: device_list[first_addressable ..]. */
struct PJRT_Client {
  PyObject* runtime; /* the bridge's client */
  size_t device_count;
  int process_index;
  size_t first_addressable;
  size_t addressable_count;
  PJRT_Device* devices;
  PJRT_Device** device_list;
  PJRT_Memory** memory_list; /* device i's memories at i * MEMORY_KIND_COUNT .. */
};



static void raise_to(int64_t* maximum, int64_t value) {
  int64_t seen = __atomic_load_n(maximum, __ATOMIC_ACQUIRE);
  while (value > seen && !__atomic_compare_exchange_n(maximum, &seen, value, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
  }
}

static void count_allocation(MemoryUsage* usage, int64_t bytes) {
  int64_t in_use = __atomic_add_fetch(&usage->bytes_in_use, bytes, __ATOMIC_ACQ_REL);
  __atomic_add_fetch(&usage->allocations, 1, __ATOMIC_ACQ_REL);
  raise_to(&usage->peak_bytes_in_use, in_use);
  raise_to(&usage->largest_allocation, bytes);
}

static void count_release(MemoryUsage* usage, int64_t bytes) { __atomic_sub_fetch(&usage->bytes_in_use, bytes, __ATOMIC_ACQ_REL); }

static PJRT_Error* client_device(PJRT_Client* client, int id, PJRT_Device** device) {
  if (id < 0 || (size_t)id >= client->device_count)
    return new_error(PJRT_Error_Code_INVALID_ARGUMENT, "mlirxla has no device %d (it has %zu)", id, client->device_count);
  *device = &client->devices[id];
  return NULL;
}

/* ------------------------------------------------------------------ events */

/* Executions and transfers finish before their call returns, so their events are born ready.
 * Two kinds are not: one from PJRT_Event_Create (ready when PJRT_Event_Set is called), and a
 * zero-copy host buffer's done_with_host_buffer (ready when the buffer stops using the host
 * memory, so that JAX may free it). Those are shared with whoever fires them: counted. */

typedef struct {
  PJRT_Event_OnReadyCallback callback;
  void* user_arg;
} Waiter;

struct PJRT_Event {
  pthread_mutex_t lock;
  pthread_cond_t became_ready;
  bool ready;
  PJRT_Error* error; /* NULL: succeeded */
  int references;
  Waiter* waiters;
  size_t waiter_count;
};

static PJRT_Event* new_event(bool ready, int references) {
  PJRT_Event* event = calloc(1, sizeof(PJRT_Event));
  pthread_mutex_init(&event->lock, NULL);
  pthread_cond_init(&event->became_ready, NULL);
  event->ready = ready;
  event->references = references;
  return event;
}

static PJRT_Event* ready_event(void) { return new_event(true, 1); }

static void release_event(PJRT_Event* event) {
  pthread_mutex_lock(&event->lock);
  bool last = --event->references == 0;
  pthread_mutex_unlock(&event->lock);
  if (!last) return;
  if (event->error) {
    free(event->error->message);
    free(event->error);
  }
  free(event->waiters);
  pthread_cond_destroy(&event->became_ready);
  pthread_mutex_destroy(&event->lock);
  free(event);
}

static PJRT_Error* copy_error(const PJRT_Error* error) {
  return error ? new_error(error->code, "%s", error->message) : NULL;
}

/* Make `event` ready (with `error`, which it takes, or none) and run what waits for it. */
static void fire_event(PJRT_Event* event, PJRT_Error* error) {
  pthread_mutex_lock(&event->lock);
  event->ready = true;
  event->error = error;
  Waiter* waiters = event->waiters;
  size_t count = event->waiter_count;
  event->waiters = NULL;
  event->waiter_count = 0;
  pthread_cond_broadcast(&event->became_ready);
  pthread_mutex_unlock(&event->lock);
  for (size_t i = 0; i < count; ++i) waiters[i].callback(copy_error(error), waiters[i].user_arg);
  free(waiters);
}

static PJRT_Error* event_destroy(PJRT_Event_Destroy_Args* args) {
  if (args->event) release_event(args->event);
  return NULL;
}

static PJRT_Error* event_is_ready(PJRT_Event_IsReady_Args* args) {
  pthread_mutex_lock(&args->event->lock);
  bool ready = args->event->ready;
  pthread_mutex_unlock(&args->event->lock);
  SET(args, is_ready, ready);
  return NULL;
}

static PJRT_Error* event_error(PJRT_Event_Error_Args* args) {
  pthread_mutex_lock(&args->event->lock);
  PJRT_Error* error = args->event->ready ? copy_error(args->event->error)
                                         : new_error(PJRT_Error_Code_FAILED_PRECONDITION, "mlirxla: PJRT_Event_Error on an event not ready");
  pthread_mutex_unlock(&args->event->lock);
  return error;
}

static PJRT_Error* event_await(PJRT_Event_Await_Args* args) {
  PJRT_Event* event = args->event;
  pthread_mutex_lock(&event->lock);
  while (!event->ready) pthread_cond_wait(&event->became_ready, &event->lock);
  PJRT_Error* error = copy_error(event->error);
  pthread_mutex_unlock(&event->lock);
  return error;
}

static PJRT_Error* event_on_ready(PJRT_Event_OnReady_Args* args) {
  PJRT_Event* event = args->event;
  pthread_mutex_lock(&event->lock);
  if (!event->ready) {
    event->waiters = realloc(event->waiters, (event->waiter_count + 1) * sizeof(Waiter));
    event->waiters[event->waiter_count++] = (Waiter){args->callback, args->user_arg};
    pthread_mutex_unlock(&event->lock);
    return NULL;
  }
  PJRT_Error* error = copy_error(event->error);
  pthread_mutex_unlock(&event->lock);
  args->callback(error, args->user_arg);
  return NULL;
}

static PJRT_Error* event_create(PJRT_Event_Create_Args* args) {
  SET(args, event, new_event(false, 1));
  return NULL;
}

static PJRT_Error* event_set(PJRT_Event_Set_Args* args) {
  PJRT_Error* error = args->error_code == PJRT_Error_Code_OK
                          ? NULL
                          : new_error(args->error_code, "%.*s", (int)args->error_message_size, args->error_message);
  fire_event(args->event, error);
  return NULL;
}

/* ------------------------------------------------------------------ plugin */

static PJRT_Error* plugin_initialize(PJRT_Plugin_Initialize_Args* args) {
  (void)args;
  return NULL;
}

/* The StableHLO versions the toolkit reads, so that JAX writes portable artifacts we can. */
static int64_t stablehlo_current[3];
static int64_t stablehlo_minimum[3];
static PJRT_NamedValue plugin_attributes_list[2];

static PJRT_Error* read_version(PyObject* sequence, int64_t* version) {
  for (Py_ssize_t i = 0; i < 3; ++i) {
    version[i] = PyLong_AsLongLong(PyTuple_GetItem(sequence, i));
    if (PyErr_Occurred()) return python_error();
  }
  return NULL;
}

static PJRT_Error* plugin_attributes(PJRT_Plugin_Attributes_Args* args) {
  if (plugin_attributes_list[0].name == NULL) {
    PyGILState_STATE state = PyGILState_UNLOCKED;
    PJRT_Error* error = enter_python(&state);
    if (error) return error;
    PyObject* versions = call_bridge("stablehlo_versions", "()");
    if (versions == NULL) error = python_error();
    if (!error) error = read_version(PyTuple_GetItem(versions, 0), stablehlo_current);
    if (!error) error = read_version(PyTuple_GetItem(versions, 1), stablehlo_minimum);
    Py_XDECREF(versions);
    leave_python(state);
    if (error) return error;
    const char* names[2] = {"stablehlo_current_version", "stablehlo_minimum_version"};
    int64_t* values[2] = {stablehlo_current, stablehlo_minimum};
    for (int i = 0; i < 2; ++i) {
      PJRT_NamedValue* value = &plugin_attributes_list[i];
      value->struct_size = PJRT_NamedValue_STRUCT_SIZE;
      value->type = PJRT_NamedValue_kInt64List;
      value->int64_array_value = values[i];
      value->value_size = 3;
      value->name_size = strlen(names[i]);
      value->name = names[i];
    }
  }
  SET(args, attributes, plugin_attributes_list);
  SET(args, num_attributes, 2);
  return NULL;
}

/* ------------------------------------------------------------------ client */

/* The create options as a dict (JAX passes those given to register_plugin). */
static PyObject* options_dict(const PJRT_NamedValue* options, size_t count) {
  PyObject* dict = PyDict_New();
  for (size_t i = 0; dict && i < count; ++i) {
    const PJRT_NamedValue* option = &options[i];
    PyObject* value = NULL;
    switch (option->type) {
      case PJRT_NamedValue_kString:
        value = PyUnicode_FromStringAndSize(option->string_value, (Py_ssize_t)option->value_size);
        break;
      case PJRT_NamedValue_kInt64:
        value = PyLong_FromLongLong(option->int64_value);
        break;
      case PJRT_NamedValue_kInt64List:
        value = PyTuple_New((Py_ssize_t)option->value_size);
        for (size_t k = 0; value && k < option->value_size; ++k)
          PyTuple_SET_ITEM(value, (Py_ssize_t)k, PyLong_FromLongLong(option->int64_array_value[k]));
        break;
      case PJRT_NamedValue_kFloat:
        value = PyFloat_FromDouble(option->float_value);
        break;
      case PJRT_NamedValue_kBool:
        value = PyBool_FromLong(option->bool_value);
        break;
    }
    PyObject* name = PyUnicode_FromStringAndSize(option->name, (Py_ssize_t)option->name_size);
    if (value && name) PyDict_SetItem(dict, name, value);
    Py_XDECREF(name);
    Py_XDECREF(value);
  }
  return dict;
}

static void init_device(PJRT_Device* device, int id, int process_index, const char* kind) {
  device->description.id = id;
  device->description.process_index = process_index;
  snprintf(device->description.kind, sizeof(device->description.kind), "%s", kind);
  snprintf(device->description.debug_string, sizeof(device->description.debug_string), "mlirxla:%s:%d", kind, id);
  snprintf(device->description.to_string, sizeof(device->description.to_string), "MlirxlaDevice(id=%d)", id);
  for (size_t k = 0; k < MEMORY_KIND_COUNT; ++k) {
    PJRT_Memory* memory = &device->spaces[k];
    memory->id = id * (int)MEMORY_KIND_COUNT + (int)k;
    memory->kind_id = (int)k;
    memory->device = device;
    snprintf(memory->debug_string, sizeof(memory->debug_string), "mlirxla:%s:%d:%s", kind, id, kMemoryKinds[k]);
    snprintf(memory->to_string, sizeof(memory->to_string), "MlirxlaMemory(device=%d, kind=%s)", id, kMemoryKinds[k]);
    device->memories[k] = memory;
  }
  device->self[0] = device;
}

static PJRT_Error* client_create(PJRT_Client_Create_Args* args) {
  REQUIRE_FIELD(args, client, "PJRT_Client_Create");
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  PyObject* options = options_dict(args->create_options, args->num_options);
  PyObject* created = options ? call_bridge("create_client", "(O)", options) : NULL;
  Py_XDECREF(options);
  long count = 0, local_count = 1;
  int process_index = 0;
  PyObject* runtime = NULL;
  const char* kind = NULL;
  char device_kind[32] = "";
  if (created == NULL || !PyArg_ParseTuple(created, "Olsil", &runtime, &count, &kind, &process_index, &local_count))
    error = python_error();
  if (!error) snprintf(device_kind, sizeof(device_kind), "%s", kind);
  Py_XINCREF(runtime);
  Py_XDECREF(created);
  leave_python(state);
  if (error) return error;
  PJRT_Client* client = calloc(1, sizeof(PJRT_Client));
  client->runtime = runtime;
  client->device_count = (size_t)count;
  client->process_index = process_index;
  client->addressable_count = (size_t)local_count;
  client->first_addressable = (size_t)process_index * (size_t)local_count;
  client->devices = calloc(client->device_count, sizeof(PJRT_Device));
  client->device_list = calloc(client->device_count, sizeof(PJRT_Device*));
  client->memory_list = calloc(client->device_count * MEMORY_KIND_COUNT, sizeof(PJRT_Memory*));
  for (size_t i = 0; i < client->device_count; ++i) {
    init_device(&client->devices[i], (int)i, (int)(i / (size_t)local_count), device_kind);
    client->devices[i].local_hardware_id = i / (size_t)local_count == (size_t)process_index ? (int)(i % (size_t)local_count) : -1;
    client->device_list[i] = &client->devices[i];
    for (size_t k = 0; k < MEMORY_KIND_COUNT; ++k) client->memory_list[i * MEMORY_KIND_COUNT + k] = &client->devices[i].spaces[k];
  }
  SET(args, client, client);
  return NULL;
}

static PJRT_Error* client_destroy(PJRT_Client_Destroy_Args* args) {
  PJRT_Client* client = args->client;
  release_object(client->runtime);
  free(client->devices);
  free(client->device_list);
  free(client->memory_list);
  free(client);
  return NULL;
}

static PJRT_Error* client_platform_name(PJRT_Client_PlatformName_Args* args) {
  SET(args, platform_name, kPlatformName);
  SET(args, platform_name_size, strlen(kPlatformName));
  return NULL;
}

static PJRT_Error* client_platform_version(PJRT_Client_PlatformVersion_Args* args) {
  static const char version[] = "mlirxla 0.1.0 (PJRT C API " TO_STRING(PJRT_API_MAJOR) "." TO_STRING(PJRT_API_MINOR) ")";
  SET(args, platform_version, version);
  SET(args, platform_version_size, strlen(version));
  return NULL;
}

static PJRT_Error* client_process_index(PJRT_Client_ProcessIndex_Args* args) {
  SET(args, process_index, args->client->process_index);
  return NULL;
}

/* jax tells the client which processes of the job are alive, whenever that changes; a process
 * that died makes the collectives waiting for it fail by their deadline (mpi_exchange.py), so
 * there is nothing to do with the news. */
static PJRT_Error* client_update_global_process_info(PJRT_Client_UpdateGlobalProcessInfo_Args* args) {
  (void)args;
  return NULL;
}

static PJRT_Error* client_devices(PJRT_Client_Devices_Args* args) {
  SET(args, devices, args->client->device_list);
  SET(args, num_devices, args->client->device_count);
  return NULL;
}

static PJRT_Error* client_addressable_devices(PJRT_Client_AddressableDevices_Args* args) {
  SET(args, addressable_devices, args->client->device_list + args->client->first_addressable);
  SET(args, num_addressable_devices, args->client->addressable_count);
  return NULL;
}

static PJRT_Error* client_lookup_device(PJRT_Client_LookupDevice_Args* args) {
  PJRT_Device* device = NULL;
  PJRT_Error* error = client_device(args->client, args->id, &device);
  SET(args, device, device);
  return error;
}

static PJRT_Error* client_lookup_addressable_device(PJRT_Client_LookupAddressableDevice_Args* args) {
  PJRT_Client* client = args->client;
  if (args->local_hardware_id < 0 || (size_t)args->local_hardware_id >= client->addressable_count)
    return new_error(PJRT_Error_Code_INVALID_ARGUMENT, "mlirxla has no addressable device %d (process %d has %zu)",
                     args->local_hardware_id, client->process_index, client->addressable_count);
  PJRT_Device* device = NULL;
  PJRT_Error* error = client_device(client, (int)(client->first_addressable + (size_t)args->local_hardware_id), &device);
  SET(args, addressable_device, device);
  return error;
}

static PJRT_Error* client_addressable_memories(PJRT_Client_AddressableMemories_Args* args) {
  SET(args, addressable_memories, args->client->memory_list + args->client->first_addressable * MEMORY_KIND_COUNT);
  SET(args, num_addressable_memories, args->client->addressable_count * MEMORY_KIND_COUNT);
  return NULL;
}

static PJRT_Error* client_default_device_assignment(PJRT_Client_DefaultDeviceAssignment_Args* args) {
  size_t needed = (size_t)args->num_replicas * (size_t)args->num_partitions;
  if (needed > args->client->device_count)
    return new_error(PJRT_Error_Code_INVALID_ARGUMENT, "mlirxla: %d replicas x %d partitions need more than its %zu devices",
                     args->num_replicas, args->num_partitions, args->client->device_count);
  for (size_t i = 0; i < needed && i < args->default_assignment_size; ++i) args->default_assignment[i] = (int)i;
  return NULL;
}

/* ----------------------------------------------------- device descriptions */

static PJRT_Error* description_id(PJRT_DeviceDescription_Id_Args* args) {
  SET(args, id, args->device_description->id);
  return NULL;
}

static PJRT_Error* description_process_index(PJRT_DeviceDescription_ProcessIndex_Args* args) {
  SET(args, process_index, args->device_description->process_index);
  return NULL;
}

static PJRT_Error* description_attributes(PJRT_DeviceDescription_Attributes_Args* args) {
  SET(args, attributes, NULL);
  SET(args, num_attributes, 0);
  return NULL;
}

static PJRT_Error* description_kind(PJRT_DeviceDescription_Kind_Args* args) {
  SET(args, device_kind, args->device_description->kind);
  SET(args, device_kind_size, strlen(args->device_description->kind));
  return NULL;
}

static PJRT_Error* description_debug_string(PJRT_DeviceDescription_DebugString_Args* args) {
  SET(args, debug_string, args->device_description->debug_string);
  SET(args, debug_string_size, strlen(args->device_description->debug_string));
  return NULL;
}

static PJRT_Error* description_to_string(PJRT_DeviceDescription_ToString_Args* args) {
  SET(args, to_string, args->device_description->to_string);
  SET(args, to_string_size, strlen(args->device_description->to_string));
  return NULL;
}

static PJRT_Error* device_get_description(PJRT_Device_GetDescription_Args* args) {
  SET(args, device_description, &args->device->description);
  return NULL;
}

static PJRT_Error* device_is_addressable(PJRT_Device_IsAddressable_Args* args) {
  SET(args, is_addressable, args->device->local_hardware_id >= 0);
  return NULL;
}

static PJRT_Error* device_local_hardware_id(PJRT_Device_LocalHardwareId_Args* args) {
  SET(args, local_hardware_id, args->device->local_hardware_id);
  return NULL;
}

static PJRT_Error* device_addressable_memories(PJRT_Device_AddressableMemories_Args* args) {
  SET(args, memories, args->device->memories);
  SET(args, num_memories, MEMORY_KIND_COUNT);
  return NULL;
}

static PJRT_Error* device_default_memory(PJRT_Device_DefaultMemory_Args* args) {
  SET(args, memory, &args->device->spaces[0]);
  return NULL;
}

/* The host's physical memory, which every virtual device allocates from: the honest limit. */
static int64_t physical_memory_bytes(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page_size > 0 ? (int64_t)pages * page_size : 0;
}

/* The device's live buffers: bytes now, peak, how many were made and the largest. The
 * allocator-pool figures (reserved, pool, free blocks) are left unset: numpy allocates each
 * array from the host heap, there is no pool to describe. */
static PJRT_Error* device_memory_stats(PJRT_Device_MemoryStats_Args* args) {
  MemoryUsage* usage = &args->device->usage;
  int64_t limit = physical_memory_bytes();
  SET(args, bytes_in_use, __atomic_load_n(&usage->bytes_in_use, __ATOMIC_ACQUIRE));
  SET(args, peak_bytes_in_use, __atomic_load_n(&usage->peak_bytes_in_use, __ATOMIC_ACQUIRE));
  SET(args, peak_bytes_in_use_is_set, true);
  SET(args, num_allocs, __atomic_load_n(&usage->allocations, __ATOMIC_ACQUIRE));
  SET(args, num_allocs_is_set, true);
  SET(args, largest_alloc_size, __atomic_load_n(&usage->largest_allocation, __ATOMIC_ACQUIRE));
  SET(args, largest_alloc_size_is_set, true);
  SET(args, bytes_limit, limit);
  SET(args, bytes_limit_is_set, limit > 0);
  SET(args, bytes_reserved_is_set, false);
  SET(args, peak_bytes_reserved_is_set, false);
  SET(args, bytes_reservable_limit_is_set, false);
  SET(args, largest_free_block_bytes_is_set, false);
  SET(args, pool_bytes_is_set, false);
  SET(args, peak_pool_bytes_is_set, false);
  return NULL;
}

/* ---------------------------------------------------------------- memories */

static PJRT_Error* memory_id(PJRT_Memory_Id_Args* args) {
  SET(args, id, args->memory->id);
  return NULL;
}

static PJRT_Error* memory_kind(PJRT_Memory_Kind_Args* args) {
  const char* kind = kMemoryKinds[args->memory->kind_id];
  SET(args, kind, kind);
  SET(args, kind_size, strlen(kind));
  return NULL;
}

static PJRT_Error* memory_kind_id(PJRT_Memory_Kind_Id_Args* args) {
  SET(args, kind_id, args->memory->kind_id);
  return NULL;
}

static PJRT_Error* memory_debug_string(PJRT_Memory_DebugString_Args* args) {
  SET(args, debug_string, args->memory->debug_string);
  SET(args, debug_string_size, strlen(args->memory->debug_string));
  return NULL;
}

static PJRT_Error* memory_to_string(PJRT_Memory_ToString_Args* args) {
  SET(args, to_string, args->memory->to_string);
  SET(args, to_string_size, strlen(args->memory->to_string));
  return NULL;
}

static PJRT_Error* memory_addressable_by_devices(PJRT_Memory_AddressableByDevices_Args* args) {
  SET(args, devices, args->memory->device->self);
  SET(args, num_devices, 1);
  return NULL;
}

/* ----------------------------------------------------------------- buffers */

struct PJRT_Buffer {
  PyObject* array; /* a numpy array; NULL once deleted or donated */
  PJRT_Buffer_Type type;
  int64_t* dims;
  int64_t* minor_to_major;
  size_t rank;
  size_t bytes;
  uintptr_t address;
  PJRT_Device* device;
  PJRT_Memory* memory; /* one of the device's: which kind the buffer is in */
  PJRT_Event* host_release; /* a zero-copy buffer's done_with_host_buffer: fired when the array goes */
  int external_references; /* views JAX holds on the memory: freeing waits for them */
  bool deleted;
  bool destroyed;
};

/* A buffer owning `array` (a new reference to a C-contiguous numpy array): its shape, address
 * and size read through the buffer protocol, without a call into Python code. */
static PJRT_Buffer* new_buffer(PyObject* array, PJRT_Buffer_Type type, PJRT_Device* device) {
  Py_buffer view;
  if (PyObject_GetBuffer(array, &view, PyBUF_ND | PyBUF_C_CONTIGUOUS) != 0) return NULL;
  PJRT_Buffer* buffer = calloc(1, sizeof(PJRT_Buffer));
  buffer->array = array;
  buffer->type = type;
  buffer->rank = (size_t)view.ndim;
  buffer->dims = calloc(buffer->rank + 1, sizeof(int64_t));
  buffer->minor_to_major = calloc(buffer->rank + 1, sizeof(int64_t));
  for (size_t i = 0; i < buffer->rank; ++i) {
    buffer->dims[i] = view.shape[i];
    buffer->minor_to_major[i] = (int64_t)(buffer->rank - 1 - i);
  }
  buffer->address = (uintptr_t)view.buf;
  buffer->bytes = (size_t)view.len;
  buffer->device = device;
  buffer->memory = &device->spaces[0];
  PyBuffer_Release(&view);
  count_allocation(&device->usage, (int64_t)buffer->bytes);
  return buffer;
}

static bool is_gone(const PJRT_Buffer* buffer) { return buffer->deleted || buffer->array == NULL; }

static void drop_array(PJRT_Buffer* buffer) {
  PyObject* array = __atomic_exchange_n(&buffer->array, NULL, __ATOMIC_ACQ_REL);
  if (array) count_release(&buffer->device->usage, (int64_t)buffer->bytes);
  release_object(array);
  if (buffer->host_release) {
    fire_event(buffer->host_release, NULL);
    release_event(buffer->host_release);
    buffer->host_release = NULL;
  }
}

static void free_buffer(PJRT_Buffer* buffer) {
  drop_array(buffer);
  free(buffer->dims);
  free(buffer->minor_to_major);
  free(buffer);
}

/* Where a new buffer goes: the device named, else the memory's, else device 0. */
static PJRT_Device* destination_device(PJRT_Client* client, PJRT_Device* device, PJRT_Memory* memory) {
  if (device) return device;
  if (memory) return memory->device;
  return &client->devices[0];
}

static PyObject* int64_tuple(const int64_t* values, size_t count) {
  PyObject* tuple = PyTuple_New((Py_ssize_t)count);
  for (size_t i = 0; tuple && i < count; ++i) PyTuple_SET_ITEM(tuple, (Py_ssize_t)i, PyLong_FromLongLong(values[i]));
  return tuple;
}

static PJRT_Error* client_buffer_from_host_buffer(PJRT_Client_BufferFromHostBuffer_Args* args) {
  REQUIRE_FIELD(args, buffer, "PJRT_Client_BufferFromHostBuffer");
  const char* name = element_type_name(args->type);
  if (name == NULL) return new_error(PJRT_Error_Code_UNIMPLEMENTED, "mlirxla: buffers of PJRT element type %d", (int)args->type);
  PJRT_Device* device = destination_device(args->client, args->device, HAS_FIELD(args, memory) ? args->memory : NULL);
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  PyObject* dims = int64_tuple(args->dims, args->num_dims);
  PyObject* strides = Py_None;
  Py_INCREF(strides);
  if (args->byte_strides != NULL && args->num_byte_strides == args->num_dims) {
    Py_DECREF(strides);
    strides = int64_tuple(args->byte_strides, args->num_byte_strides);
  }
  bool zero_copy = args->host_buffer_semantics == PJRT_HostBufferSemantics_kImmutableZeroCopy;
  PyObject* made = call_bridge("buffer_from_host", "(KsOOO)", (unsigned long long)(uintptr_t)args->data, name, dims, strides,
                               zero_copy ? Py_True : Py_False);
  Py_DECREF(dims);
  Py_DECREF(strides);
  PyObject* array = NULL;
  int is_view = 0;
  PJRT_Buffer* buffer = NULL;
  if (made != NULL && PyArg_ParseTuple(made, "Op", &array, &is_view)) {
    Py_INCREF(array);
    buffer = new_buffer(array, args->type, device);
    if (buffer == NULL)
      Py_DECREF(array);
    else if (HAS_FIELD(args, memory) && args->memory)
      buffer->memory = args->memory;
  }
  if (buffer == NULL) error = python_error();
  Py_XDECREF(made);
  leave_python(state);
  if (error) return error;
  /* a view of the host memory: JAX keeps the memory until the buffer lets go of it */
  if (is_view) buffer->host_release = new_event(false, 2);
  SET(args, done_with_host_buffer, is_view ? buffer->host_release : ready_event());
  SET(args, buffer, buffer);
  return NULL;
}

static bool is_row_major(const PJRT_Buffer_MemoryLayout* layout, size_t rank) {
  if (layout == NULL) return true;
  if (layout->type != PJRT_Buffer_MemoryLayout_Type_Tiled || layout->tiled.num_tiles != 0) return false;
  for (size_t i = 0; i < layout->tiled.minor_to_major_size; ++i)
    if (layout->tiled.minor_to_major[i] != (int64_t)(rank - 1 - i)) return false;
  return true;
}

/* A buffer of the shape asked for, its contents unspecified until written (zeros here: a
 * fresh array from the bridge, so no stale memory shows). */
static PJRT_Error* client_create_uninitialized_buffer(PJRT_Client_CreateUninitializedBuffer_Args* args) {
  REQUIRE_FIELD(args, buffer, "PJRT_Client_CreateUninitializedBuffer");
  const char* name = element_type_name(args->shape_element_type);
  if (name == NULL)
    return new_error(PJRT_Error_Code_UNIMPLEMENTED, "mlirxla: buffers of PJRT element type %d", (int)args->shape_element_type);
  if (!is_row_major(args->shape_layout, args->shape_num_dims))
    return new_error(PJRT_Error_Code_UNIMPLEMENTED, "mlirxla: PJRT_Client_CreateUninitializedBuffer in a layout other than row-major");
  PJRT_Device* device = destination_device(args->client, args->device, args->memory);
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  PyObject* dims = int64_tuple(args->shape_dims, args->shape_num_dims);
  PyObject* array = dims ? call_bridge("uninitialized_array", "(sO)", name, dims) : NULL;
  Py_XDECREF(dims);
  PJRT_Buffer* buffer = array ? new_buffer(array, args->shape_element_type, device) : NULL;
  if (buffer == NULL) {
    Py_XDECREF(array);
    error = python_error();
  } else if (args->memory) {
    buffer->memory = args->memory;
  }
  leave_python(state);
  if (error) return error;
  SET(args, buffer, buffer);
  return NULL;
}

static PJRT_Error* deleted_error(const char* function) {
  return new_error(PJRT_Error_Code_FAILED_PRECONDITION, "mlirxla: %s on a deleted (or donated) buffer", function);
}

static PJRT_Error* buffer_destroy(PJRT_Buffer_Destroy_Args* args) {
  PJRT_Buffer* buffer = args->buffer;
  if (__atomic_load_n(&buffer->external_references, __ATOMIC_ACQUIRE) > 0)
    buffer->destroyed = true;
  else
    free_buffer(buffer);
  return NULL;
}

static PJRT_Error* buffer_element_type(PJRT_Buffer_ElementType_Args* args) {
  SET(args, type, args->buffer->type);
  return NULL;
}

static PJRT_Error* buffer_dimensions(PJRT_Buffer_Dimensions_Args* args) {
  SET(args, dims, args->buffer->dims);
  SET(args, num_dims, args->buffer->rank);
  return NULL;
}

static PJRT_Error* buffer_unpadded_dimensions(PJRT_Buffer_UnpaddedDimensions_Args* args) {
  SET(args, unpadded_dims, args->buffer->dims);
  SET(args, num_dims, args->buffer->rank);
  return NULL;
}

static PJRT_Error* buffer_dynamic_dimension_indices(PJRT_Buffer_DynamicDimensionIndices_Args* args) {
  SET(args, dynamic_dim_indices, NULL);
  SET(args, num_dynamic_dims, 0);
  return NULL;
}

static PJRT_Error* buffer_get_memory_layout(PJRT_Buffer_GetMemoryLayout_Args* args) {
  if (!HAS_FIELD(args, layout)) return NULL;
  memset(&args->layout, 0, sizeof(args->layout));
  args->layout.struct_size = PJRT_Buffer_MemoryLayout_STRUCT_SIZE;
  args->layout.type = PJRT_Buffer_MemoryLayout_Type_Tiled;
  args->layout.tiled.struct_size = PJRT_Buffer_MemoryLayout_Tiled_STRUCT_SIZE;
  args->layout.tiled.minor_to_major = args->buffer->minor_to_major;
  args->layout.tiled.minor_to_major_size = args->buffer->rank;
  return NULL;
}

static PJRT_Error* buffer_to_host_buffer(PJRT_Buffer_ToHostBuffer_Args* args) {
  PJRT_Buffer* buffer = args->src;
  if (is_gone(buffer)) return deleted_error("PJRT_Buffer_ToHostBuffer");
  if (HAS_FIELD(args, host_layout) && !is_row_major(args->host_layout, buffer->rank))
    return new_error(PJRT_Error_Code_UNIMPLEMENTED, "mlirxla: PJRT_Buffer_ToHostBuffer into a layout other than row-major");
  if (args->dst == NULL) {
    SET(args, dst_size, buffer->bytes);
    return NULL;
  }
  if (args->dst_size < buffer->bytes)
    return new_error(PJRT_Error_Code_INVALID_ARGUMENT, "mlirxla: PJRT_Buffer_ToHostBuffer: %zu bytes given for %zu", args->dst_size,
                     buffer->bytes);
  memcpy(args->dst, (const void*)buffer->address, buffer->bytes);
  SET(args, event, ready_event());
  return NULL;
}

/* `transfer_size` bytes from `offset` of the buffer's row-major bytes (what
 * OnDeviceSizeInBytes counts) into `dst`; done when it returns. */
static PJRT_Error* buffer_copy_raw_to_host(PJRT_Buffer_CopyRawToHost_Args* args) {
  PJRT_Buffer* buffer = args->buffer;
  if (is_gone(buffer)) return deleted_error("PJRT_Buffer_CopyRawToHost");
  if (args->offset < 0 || args->transfer_size < 0 || (uint64_t)args->offset + (uint64_t)args->transfer_size > buffer->bytes)
    return new_error(PJRT_Error_Code_INVALID_ARGUMENT,
                     "mlirxla: PJRT_Buffer_CopyRawToHost of %lld bytes at offset %lld, outside the buffer's %zu bytes",
                     (long long)args->transfer_size, (long long)args->offset, buffer->bytes);
  if (args->transfer_size > 0) memcpy(args->dst, (const char*)buffer->address + args->offset, (size_t)args->transfer_size);
  SET(args, event, ready_event());
  return NULL;
}

static PJRT_Error* buffer_on_device_size(PJRT_Buffer_OnDeviceSizeInBytes_Args* args) {
  SET(args, on_device_size_in_bytes, args->buffer->bytes);
  return NULL;
}

static PJRT_Error* buffer_delete(PJRT_Buffer_Delete_Args* args) {
  args->buffer->deleted = true;
  if (__atomic_load_n(&args->buffer->external_references, __ATOMIC_ACQUIRE) == 0) drop_array(args->buffer);
  return NULL;
}

static PJRT_Error* buffer_is_deleted(PJRT_Buffer_IsDeleted_Args* args) {
  SET(args, is_deleted, is_gone(args->buffer));
  return NULL;
}

static PJRT_Error* buffer_is_on_cpu(PJRT_Buffer_IsOnCpu_Args* args) {
  SET(args, is_on_cpu, true);
  return NULL;
}

static PJRT_Error* buffer_device(PJRT_Buffer_Device_Args* args) {
  SET(args, device, args->buffer->device);
  return NULL;
}

static PJRT_Error* buffer_memory(PJRT_Buffer_Memory_Args* args) {
  SET(args, memory, args->buffer->memory);
  return NULL;
}

static PJRT_Error* buffer_ready_event(PJRT_Buffer_ReadyEvent_Args* args) {
  SET(args, event, ready_event());
  return NULL;
}

static PJRT_Error* buffer_unsafe_pointer(PJRT_Buffer_UnsafePointer_Args* args) {
  if (is_gone(args->buffer)) return deleted_error("PJRT_Buffer_UnsafePointer");
  SET(args, buffer_pointer, args->buffer->address);
  return NULL;
}

static PJRT_Error* buffer_opaque_pointer(PJRT_Buffer_OpaqueDeviceMemoryDataPointer_Args* args) {
  if (is_gone(args->buffer)) return deleted_error("PJRT_Buffer_OpaqueDeviceMemoryDataPointer");
  SET(args, device_memory_ptr, (void*)args->buffer->address);
  return NULL;
}

static PJRT_Error* buffer_increase_references(PJRT_Buffer_IncreaseExternalReferenceCount_Args* args) {
  if (is_gone(args->buffer)) return deleted_error("PJRT_Buffer_IncreaseExternalReferenceCount");
  __atomic_add_fetch(&args->buffer->external_references, 1, __ATOMIC_ACQ_REL);
  return NULL;
}

static PJRT_Error* buffer_decrease_references(PJRT_Buffer_DecreaseExternalReferenceCount_Args* args) {
  PJRT_Buffer* buffer = args->buffer;
  if (__atomic_load_n(&buffer->external_references, __ATOMIC_ACQUIRE) == 0)
    return new_error(PJRT_Error_Code_FAILED_PRECONDITION, "mlirxla: external reference count of a buffer below zero");
  if (__atomic_sub_fetch(&buffer->external_references, 1, __ATOMIC_ACQ_REL) > 0) return NULL;
  if (buffer->destroyed)
    free_buffer(buffer);
  else if (buffer->deleted)
    drop_array(buffer);
  return NULL;
}

static PJRT_Error* copy_buffer(PJRT_Buffer* source, PJRT_Device* device, PJRT_Buffer** copy) {
  if (is_gone(source)) return deleted_error("PJRT_Buffer_CopyToDevice");
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  PyObject* array = call_bridge("copy", "(O)", source->array);
  *copy = array ? new_buffer(array, source->type, device) : NULL;
  if (*copy == NULL) {
    Py_XDECREF(array);
    error = python_error();
  }
  leave_python(state);
  return error;
}

static PJRT_Error* buffer_copy_to_device(PJRT_Buffer_CopyToDevice_Args* args) {
  PJRT_Buffer* copy = NULL;
  PJRT_Error* error = copy_buffer(args->buffer, args->dst_device, &copy);
  SET(args, dst_buffer, copy);
  return error;
}

static PJRT_Error* buffer_copy_to_memory(PJRT_Buffer_CopyToMemory_Args* args) {
  PJRT_Buffer* copy = NULL;
  PJRT_Error* error = copy_buffer(args->buffer, args->dst_memory->device, &copy);
  if (copy) copy->memory = args->dst_memory;
  SET(args, dst_buffer, copy);
  return error;
}

/* ----------------------------------------------------------- native plans */

/* An execution the runtime needs no Python for (`Executable.native_plan`): the plugin fills
 * the address table, makes the outputs and calls the code itself. A dispatch of a small
 * jitted op then runs no Python: the Python path took 1.7 us of the 7 such a call took. */

enum { MAX_KERNEL_ARGUMENTS = 12, STACK_ALLOCATIONS = 64, MAX_TEMPS = 8, TEMP_ALIGNMENT = 64 };

typedef void* Pointer;

typedef struct {
  void* function; /* void kernel(ptr, ...); NULL for a copy of `copy_bytes` to its first address from its second */
  size_t argument_count;
  size_t* allocations;
  int64_t* offsets;
  size_t copy_bytes;
} NativeStep;

typedef struct {
  size_t allocation_count;
  int64_t* template; /* the address table before the parameters and outputs: the constants */
  size_t output_count;
  size_t* output_allocations;
  PyObject* output_makers; /* a tuple: each called with no arguments makes its output's array */
  size_t temp_count;
  size_t temp_allocations[MAX_TEMPS];
  size_t temp_bytes[MAX_TEMPS]; /* rounded up to TEMP_ALIGNMENT */
  int32_t (*driver)(int64_t*, int64_t*);
  int64_t* driver_imports;
  size_t step_count;
  NativeStep* steps;
} NativePlan;

static void free_native_plan(NativePlan* plan) {
  if (plan == NULL) return;
  for (size_t i = 0; i < plan->step_count; ++i) {
    free(plan->steps[i].allocations);
    free(plan->steps[i].offsets);
  }
  free(plan->steps);
  free(plan->template);
  free(plan->output_allocations);
  release_object(plan->output_makers);
  free(plan);
}

static size_t* size_list(PyObject* values, size_t* count) {
  *count = (size_t)PyTuple_Size(values);
  size_t* list = calloc(*count + 1, sizeof(size_t));
  for (size_t i = 0; i < *count; ++i) list[i] = PyLong_AsSize_t(PyTuple_GetItem(values, (Py_ssize_t)i));
  return list;
}

static int64_t* int64_list(PyObject* values, size_t* count) {
  *count = (size_t)PyTuple_Size(values);
  int64_t* list = calloc(*count + 1, sizeof(int64_t));
  for (size_t i = 0; i < *count; ++i) list[i] = PyLong_AsLongLong(PyTuple_GetItem(values, (Py_ssize_t)i));
  return list;
}

/* The native plan of the bridge's tuple (template, output allocations, output makers, temps,
 * (driver, imports) or None, steps), with the GIL held; NULL for None, a kernel with more
 * arguments than `run_step` takes, more than MAX_TEMPS temps, or a tuple that does not parse
 * (the Python path runs). */
static NativePlan* read_native_plan(PyObject* made, size_t output_count) {
  PyObject *template, *outputs, *makers, *temps, *driver, *steps;
  if (made == Py_None || !PyArg_ParseTuple(made, "O!O!O!O!OO!", &PyTuple_Type, &template, &PyTuple_Type, &outputs, &PyTuple_Type, &makers,
                                           &PyTuple_Type, &temps, &driver, &PyTuple_Type, &steps)) {
    PyErr_Clear();
    return NULL;
  }
  NativePlan* plan = calloc(1, sizeof(NativePlan));
  plan->template = int64_list(template, &plan->allocation_count);
  plan->output_allocations = size_list(outputs, &plan->output_count);
  Py_INCREF(makers);
  plan->output_makers = makers;
  if (driver != Py_None) {
    plan->driver = (int32_t(*)(int64_t*, int64_t*))PyLong_AsVoidPtr(PyTuple_GetItem(driver, 0));
    plan->driver_imports = (int64_t*)PyLong_AsVoidPtr(PyTuple_GetItem(driver, 1));
  }
  plan->step_count = (size_t)PyTuple_Size(steps);
  plan->steps = calloc(plan->step_count + 1, sizeof(NativeStep));
  bool fits = plan->output_count == output_count && PyTuple_Size(makers) == (Py_ssize_t)output_count && PyTuple_Size(temps) <= MAX_TEMPS;
  for (size_t t = 0; fits && t < (size_t)PyTuple_Size(temps); ++t) {
    size_t bytes = PyLong_AsSize_t(PyTuple_GetItem(PyTuple_GetItem(temps, (Py_ssize_t)t), 1));
    plan->temp_allocations[t] = PyLong_AsSize_t(PyTuple_GetItem(PyTuple_GetItem(temps, (Py_ssize_t)t), 0));
    plan->temp_bytes[t] = (bytes + TEMP_ALIGNMENT - 1) / TEMP_ALIGNMENT * TEMP_ALIGNMENT;
    plan->temp_count = t + 1;
    fits = plan->temp_allocations[t] < plan->allocation_count;
  }
  for (size_t i = 0; i < plan->step_count; ++i) {
    NativeStep* step = &plan->steps[i];
    PyObject* described = PyTuple_GetItem(steps, (Py_ssize_t)i);
    if (!PyTuple_Check(described) || PyTuple_Size(described) != 4) {
      fits = false;
      break;
    }
    step->function = PyLong_AsVoidPtr(PyTuple_GetItem(described, 0));
    step->allocations = size_list(PyTuple_GetItem(described, 1), &step->argument_count);
    size_t offsets = 0;
    step->offsets = int64_list(PyTuple_GetItem(described, 2), &offsets);
    step->copy_bytes = PyLong_AsSize_t(PyTuple_GetItem(described, 3));
    fits = fits && offsets == step->argument_count && step->argument_count >= 1 &&
           (step->function ? step->argument_count <= MAX_KERNEL_ARGUMENTS : step->argument_count == 2);
    for (size_t k = 0; k < step->argument_count; ++k) fits = fits && step->allocations[k] < plan->allocation_count;
  }
  for (size_t k = 0; k < plan->output_count; ++k) fits = fits && plan->output_allocations[k] < plan->allocation_count;
  if (!fits || PyErr_Occurred()) {
    PyErr_Clear();
    free_native_plan(plan);
    return NULL;
  }
  return plan;
}

static void run_step(const NativeStep* step, const int64_t* bases) {
  Pointer a[MAX_KERNEL_ARGUMENTS];
  for (size_t k = 0; k < step->argument_count; ++k) a[k] = (Pointer)(intptr_t)(bases[step->allocations[k]] + step->offsets[k]);
  void* f = step->function;
  if (f == NULL) {
    memmove(a[0], a[1], step->copy_bytes);
    return;
  }
  switch (step->argument_count) {
    case 1: ((void (*)(Pointer))f)(a[0]); break;
    case 2: ((void (*)(Pointer, Pointer))f)(a[0], a[1]); break;
    case 3: ((void (*)(Pointer, Pointer, Pointer))f)(a[0], a[1], a[2]); break;
    case 4: ((void (*)(Pointer, Pointer, Pointer, Pointer))f)(a[0], a[1], a[2], a[3]); break;
    case 5: ((void (*)(Pointer, Pointer, Pointer, Pointer, Pointer))f)(a[0], a[1], a[2], a[3], a[4]); break;
    case 6: ((void (*)(Pointer, Pointer, Pointer, Pointer, Pointer, Pointer))f)(a[0], a[1], a[2], a[3], a[4], a[5]); break;
    case 7: ((void (*)(Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer))f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
    case 8:
      ((void (*)(Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer))f)(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
      break;
    case 9:
      ((void (*)(Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer))f)(a[0], a[1], a[2], a[3], a[4], a[5],
                                                                                                   a[6], a[7], a[8]);
      break;
    case 10:
      ((void (*)(Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer))f)(a[0], a[1], a[2], a[3], a[4],
                                                                                                            a[5], a[6], a[7], a[8], a[9]);
      break;
    case 11:
      ((void (*)(Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer))f)(
          a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10]);
      break;
    case 12:
      ((void (*)(Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer, Pointer))f)(
          a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], a[8], a[9], a[10], a[11]);
      break;
  }
}

/* ------------------------------------------------------------- executables */

/* A layout of the layouts extension (below). Every mlirxla buffer is row-major, so a layout is
 * a rank. An executable's layouts are its own (the caller never destroys them); the others
 * belong to the caller, who destroys them. */
typedef struct PJRT_Layouts_MemoryLayout {
  size_t rank;
  bool owned_by_executable;
} PJRT_Layouts_MemoryLayout;

static PJRT_Layouts_MemoryLayout* new_layout(size_t rank, bool owned_by_executable) {
  PJRT_Layouts_MemoryLayout* layout = malloc(sizeof(PJRT_Layouts_MemoryLayout));
  layout->rank = rank;
  layout->owned_by_executable = owned_by_executable;
  return layout;
}

/* One executable-owned layout per rank of `ranks`. */
static PJRT_Layouts_MemoryLayout** executable_layouts(const size_t* ranks, size_t count) {
  PJRT_Layouts_MemoryLayout** layouts = calloc(count + 1, sizeof(PJRT_Layouts_MemoryLayout*));
  for (size_t i = 0; i < count; ++i) layouts[i] = new_layout(ranks[i], true);
  return layouts;
}

static void free_layouts(PJRT_Layouts_MemoryLayout** layouts, size_t count) {
  if (layouts == NULL) return;
  for (size_t i = 0; i < count; ++i) free(layouts[i]);
  free(layouts);
}

struct PJRT_Executable {
  PyObject* runtime; /* the bridge's executable */
  char* name;
  char* fingerprint;
  size_t output_count;
  PJRT_Buffer_Type* output_types;
  int64_t* output_dims; /* all outputs' dimensions, one after the other */
  size_t* output_ranks;
  const char** memory_kinds;
  size_t* memory_kind_sizes;
  int* output_memory; /* per output, the index of its memory kind */
  int64_t* donatable; /* parameters whose buffer an output may take over, in order */
  size_t donatable_count;
  size_t parameter_count;
  PJRT_Buffer_Type* parameter_types;
  int64_t* parameter_dims; /* all parameters' dimensions, one after the other */
  size_t* parameter_ranks;
  PJRT_Layouts_MemoryLayout** output_layouts;
  PJRT_Layouts_MemoryLayout** parameter_layouts;
  NativePlan* native; /* NULL: every execution goes through the bridge */
  char* program; /* the StableHLO it was compiled from, in format "mlir" */
  size_t program_size;
  char* options; /* the CompileOptionsProto it was compiled with */
  size_t options_size;
  int* device_ids; /* the devices its compile options assigned, by flattened id (replica * partitions + partition) */
  size_t device_count;
  int replica_count;
  int partition_count;
  bool cost_analyzed; /* the cost properties are filled in (on first request, with the GIL) */
  PJRT_NamedValue* cost_properties;
  size_t cost_property_count;
};

struct PJRT_LoadedExecutable {
  PJRT_Executable* executable;
  PJRT_Client* client;
  PJRT_Device** devices; /* the executable's devices, by flattened id */
  size_t device_count;
  PJRT_Device** addressable; /* those of this process, in the same order */
  PyObject* addressable_positions; /* their flattened ids, a tuple */
  PyObject* device_ids; /* every flattened id's device id, a tuple */
  size_t addressable_count;
  bool deleted;
};

static char* copy_string(const char* text) {
  size_t size = strlen(text) + 1;
  char* copy = malloc(size);
  memcpy(copy, text, size);
  return copy;
}

static char* copy_bytes(const char* data, size_t size) {
  char* copy = malloc(size + 1);
  if (size) memcpy(copy, data, size);
  return copy;
}

static void free_executable(PJRT_Executable* executable) {
  release_object(executable->runtime);
  free(executable->name);
  free(executable->fingerprint);
  free(executable->output_types);
  free(executable->output_dims);
  free(executable->output_ranks);
  free(executable->memory_kinds);
  free(executable->memory_kind_sizes);
  free(executable->output_memory);
  free(executable->donatable);
  free(executable->parameter_types);
  free(executable->parameter_dims);
  free(executable->parameter_ranks);
  free_layouts(executable->output_layouts, executable->output_count);
  free_layouts(executable->parameter_layouts, executable->parameter_count);
  free_native_plan(executable->native);
  free(executable->program);
  free(executable->options);
  free(executable->device_ids);
  for (size_t i = 0; i < executable->cost_property_count; ++i) free((char*)executable->cost_properties[i].name);
  free(executable->cost_properties);
  free(executable);
}

/* The executable's name, fingerprint, outputs, donatable parameters and grid, from the bridge. */
static bool describe_executable(PJRT_Executable* executable) {
  PyObject* info = call_bridge("executable_info", "(O)", executable->runtime);
  const char *name = NULL, *fingerprint = NULL;
  PyObject *outputs = NULL, *donatable = NULL;
  if (info == NULL || !PyArg_ParseTuple(info, "ssOOii", &name, &fingerprint, &outputs, &donatable, &executable->replica_count,
                                        &executable->partition_count)) {
    Py_XDECREF(info);
    return false;
  }
  executable->name = copy_string(name);
  executable->fingerprint = copy_string(fingerprint);
  size_t count = (size_t)PyList_Size(outputs), total = 0;
  executable->output_count = count;
  executable->output_types = calloc(count + 1, sizeof(PJRT_Buffer_Type));
  executable->output_ranks = calloc(count + 1, sizeof(size_t));
  executable->memory_kinds = calloc(count + 1, sizeof(char*));
  executable->memory_kind_sizes = calloc(count + 1, sizeof(size_t));
  executable->output_memory = calloc(count + 1, sizeof(int));
  for (size_t i = 0; i < count; ++i) total += (size_t)PyTuple_Size(PyTuple_GetItem(PyList_GetItem(outputs, (Py_ssize_t)i), 1));
  executable->output_dims = calloc(total + 1, sizeof(int64_t));
  size_t position = 0;
  for (size_t i = 0; i < count; ++i) {
    PyObject* output = PyList_GetItem(outputs, (Py_ssize_t)i);
    PyObject* dims = PyTuple_GetItem(output, 1);
    const char* type_name = PyUnicode_AsUTF8(PyTuple_GetItem(output, 0));
    executable->output_types[i] = element_type_of(type_name);
    if (executable->output_types[i] == PJRT_Buffer_Type_INVALID) {
      PyErr_Format(PyExc_TypeError, "output %zu has element type %s, which has no PJRT buffer type", i, type_name);
      Py_DECREF(info);
      return false;
    }
    executable->output_ranks[i] = (size_t)PyTuple_Size(dims);
    for (Py_ssize_t k = 0; k < PyTuple_Size(dims); ++k) executable->output_dims[position++] = PyLong_AsLongLong(PyTuple_GetItem(dims, k));
    int kind_id = memory_kind_id_of(PyUnicode_AsUTF8(PyTuple_GetItem(output, 2)));
    if (kind_id < 0) {
      PyErr_Format(PyExc_ValueError, "output %zu is in memory kind %s, which mlirxla devices do not have", i,
                   PyUnicode_AsUTF8(PyTuple_GetItem(output, 2)));
      Py_DECREF(info);
      return false;
    }
    executable->output_memory[i] = kind_id;
    executable->memory_kinds[i] = kMemoryKinds[kind_id];
    executable->memory_kind_sizes[i] = strlen(kMemoryKinds[kind_id]);
  }
  executable->output_layouts = executable_layouts(executable->output_ranks, count);
  executable->donatable_count = (size_t)PyTuple_Size(donatable);
  executable->donatable = calloc(executable->donatable_count + 1, sizeof(int64_t));
  for (size_t i = 0; i < executable->donatable_count; ++i)
    executable->donatable[i] = PyLong_AsLongLong(PyTuple_GetItem(donatable, (Py_ssize_t)i));
  Py_DECREF(info);
  return !PyErr_Occurred();
}

/* The parameters' element types and dimensions, from the bridge: execute checks its buffers
 * against them here, so that the bridge need not look at the arrays again. */
static bool describe_parameters(PJRT_Executable* executable) {
  PyObject* parameters = call_bridge("parameter_types", "(O)", executable->runtime);
  if (parameters == NULL) return false;
  size_t count = (size_t)PyList_Size(parameters), total = 0;
  for (size_t i = 0; i < count; ++i) total += (size_t)PyTuple_Size(PyTuple_GetItem(PyList_GetItem(parameters, (Py_ssize_t)i), 1));
  executable->parameter_count = count;
  executable->parameter_types = calloc(count + 1, sizeof(PJRT_Buffer_Type));
  executable->parameter_ranks = calloc(count + 1, sizeof(size_t));
  executable->parameter_dims = calloc(total + 1, sizeof(int64_t));
  size_t position = 0;
  for (size_t i = 0; i < count; ++i) {
    PyObject* parameter = PyList_GetItem(parameters, (Py_ssize_t)i);
    PyObject* dims = PyTuple_GetItem(parameter, 1);
    executable->parameter_types[i] = element_type_of(PyUnicode_AsUTF8(PyTuple_GetItem(parameter, 0)));
    executable->parameter_ranks[i] = (size_t)PyTuple_Size(dims);
    for (Py_ssize_t k = 0; k < PyTuple_Size(dims); ++k) executable->parameter_dims[position++] = PyLong_AsLongLong(PyTuple_GetItem(dims, k));
  }
  executable->parameter_layouts = executable_layouts(executable->parameter_ranks, count);
  Py_DECREF(parameters);
  return !PyErr_Occurred();
}

/* How executions may run without the bridge (NULL where they may not), from the bridge. */
static bool describe_native_plan(PJRT_Executable* executable) {
  PyObject* native = call_bridge("native_plan", "(O)", executable->runtime);
  if (native == NULL) return false;
  executable->native = read_native_plan(native, executable->output_count);
  Py_DECREF(native);
  return true;
}

/* Whether every argument buffer has its parameter's element type and dimensions. */
static bool arguments_match(const PJRT_Executable* executable, PJRT_Buffer* const* arguments, size_t argument_count) {
  if (argument_count != executable->parameter_count) return false;
  const int64_t* dims = executable->parameter_dims;
  for (size_t i = 0; i < argument_count; ++i) {
    const PJRT_Buffer* buffer = arguments[i];
    size_t rank = executable->parameter_ranks[i];
    if (buffer->type != executable->parameter_types[i] || buffer->rank != rank ||
        (rank > 0 && memcmp(buffer->dims, dims, rank * sizeof(int64_t)) != 0))
      return false;
    dims += rank;
  }
  return true;
}

/* A loaded executable from what the bridge compiled or deserialized, with the GIL held: the
 * tuple (runtime executable, device ids by flattened id, program bytes, compile options bytes). */
static PJRT_Error* load_executable(PJRT_Client* client, PyObject* made, PJRT_LoadedExecutable** loaded) {
  PyObject *runtime = NULL, *device_ids = NULL;
  const char *program = NULL, *options = NULL;
  Py_ssize_t program_size = 0, options_size = 0;
  if (!PyArg_ParseTuple(made, "OOy#y#", &runtime, &device_ids, &program, &program_size, &options, &options_size))
    return python_error();
  PyObject* ids = PySequence_Fast(device_ids, "the bridge's device ids are not a sequence");
  if (ids == NULL) return python_error();
  size_t device_count = (size_t)PySequence_Fast_GET_SIZE(ids);
  PJRT_Device** devices = calloc(device_count + 1, sizeof(PJRT_Device*));
  int* device_id_list = calloc(device_count + 1, sizeof(int));
  PJRT_Error* error = NULL;
  for (size_t d = 0; !error && d < device_count; ++d) {
    device_id_list[d] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(ids, (Py_ssize_t)d));
    error = PyErr_Occurred() ? python_error() : client_device(client, device_id_list[d], &devices[d]);
  }
  Py_DECREF(ids);
  if (error) {
    free(devices);
    free(device_id_list);
    return error;
  }
  PJRT_Executable* executable = calloc(1, sizeof(PJRT_Executable));
  Py_INCREF(runtime);
  executable->runtime = runtime;
  executable->program = copy_bytes(program, (size_t)program_size);
  executable->program_size = (size_t)program_size;
  executable->options = copy_bytes(options, (size_t)options_size);
  executable->options_size = (size_t)options_size;
  executable->device_ids = device_id_list;
  executable->device_count = device_count;
  if (!describe_executable(executable) || !describe_parameters(executable) || !describe_native_plan(executable)) {
    error = python_error();
    free_executable(executable);
    free(devices);
    return error;
  }
  *loaded = calloc(1, sizeof(PJRT_LoadedExecutable));
  (*loaded)->executable = executable;
  (*loaded)->client = client;
  (*loaded)->devices = devices;
  (*loaded)->device_count = device_count;
  (*loaded)->addressable = calloc(device_count + 1, sizeof(PJRT_Device*));
  (*loaded)->device_ids = PyTuple_New((Py_ssize_t)device_count);
  size_t here = 0;
  for (size_t d = 0; d < device_count; ++d) {
    PyTuple_SET_ITEM((*loaded)->device_ids, (Py_ssize_t)d, PyLong_FromLong(device_id_list[d]));
    if (devices[d]->local_hardware_id >= 0) (*loaded)->addressable[here++] = devices[d];
  }
  (*loaded)->addressable_count = here;
  (*loaded)->addressable_positions = PyTuple_New((Py_ssize_t)here);
  here = 0;
  for (size_t d = 0; d < device_count; ++d)
    if (devices[d]->local_hardware_id >= 0) PyTuple_SET_ITEM((*loaded)->addressable_positions, (Py_ssize_t)here++, PyLong_FromSize_t(d));
  return NULL;
}

/* jaxlib calls Compile on its own threads, which flush denormals (FTZ and DAZ set, as XLA:CPU
 * computes): the compiler's own arithmetic there (constant folding, the constants it writes
 * into kernels, in numpy) read a denormal constant as zero (jnp.spacing's smallest subnormal
 * came out 0). A compile runs with gradual underflow, the thread's setting put back after. */
#if defined(__x86_64__)
enum { kFlushingBits = 0x8040 }; /* MXCSR's FTZ (bit 15) and DAZ (bit 6) */
static unsigned int gradual_underflow(void) {
  unsigned int saved = _mm_getcsr();
  if (saved & kFlushingBits) _mm_setcsr(saved & ~(unsigned int)kFlushingBits);
  return saved;
}
static void restore_underflow(unsigned int saved) {
  if (saved & kFlushingBits) _mm_setcsr(saved);
}
#else
static unsigned int gradual_underflow(void) { return 0; }
static void restore_underflow(unsigned int saved) { (void)saved; }
#endif

static PJRT_Error* client_compile(PJRT_Client_Compile_Args* args) {
  REQUIRE_FIELD(args, executable, "PJRT_Client_Compile");
  const PJRT_Program* program = args->program;
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  unsigned int underflow = gradual_underflow();
  PyObject* compiled = call_bridge("compile", "(Oy#s#y#)", args->client->runtime, program->code, (Py_ssize_t)program->code_size,
                                   program->format, (Py_ssize_t)program->format_size, args->compile_options,
                                   (Py_ssize_t)args->compile_options_size);
  restore_underflow(underflow);
  PJRT_LoadedExecutable* loaded = NULL;
  error = compiled ? load_executable(args->client, compiled, &loaded) : python_error();
  Py_XDECREF(compiled);
  leave_python(state);
  if (error) return error;
  SET(args, executable, loaded);
  return NULL;
}

static PJRT_Error* executable_destroy(PJRT_Executable_Destroy_Args* args) {
  (void)args; /* owned by its loaded executable */
  return NULL;
}

static PJRT_Error* loaded_destroy(PJRT_LoadedExecutable_Destroy_Args* args) {
  free_executable(args->executable->executable);
  release_object(args->executable->addressable_positions);
  release_object(args->executable->device_ids);
  free(args->executable->addressable);
  free(args->executable->devices);
  free(args->executable);
  return NULL;
}

static PJRT_Error* loaded_get_executable(PJRT_LoadedExecutable_GetExecutable_Args* args) {
  SET(args, executable, args->loaded_executable->executable);
  return NULL;
}

static PJRT_Error* loaded_addressable_devices(PJRT_LoadedExecutable_AddressableDevices_Args* args) {
  SET(args, addressable_devices, args->executable->addressable);
  SET(args, num_addressable_devices, args->executable->addressable_count);
  return NULL;
}

static PJRT_Error* loaded_delete(PJRT_LoadedExecutable_Delete_Args* args) {
  args->executable->deleted = true;
  return NULL;
}

static PJRT_Error* loaded_is_deleted(PJRT_LoadedExecutable_IsDeleted_Args* args) {
  SET(args, is_deleted, args->executable->deleted);
  return NULL;
}

static PJRT_Error* loaded_fingerprint(PJRT_LoadedExecutable_Fingerprint_Args* args) {
  SET(args, executable_fingerprint, args->executable->executable->fingerprint);
  SET(args, executable_fingerprint_size, strlen(args->executable->executable->fingerprint));
  return NULL;
}

/* DeviceAssignmentProto{replica_count: R, computation_count: P, computation_devices: one per
 * partition, {replica_device_ids: the device of each replica}} */
struct PJRT_DeviceAssignmentSerialized {
  char* bytes;
  size_t size;
};

static void free_device_assignment(PJRT_DeviceAssignmentSerialized* assignment) {
  free(assignment->bytes);
  free(assignment);
}

static size_t write_varint(char* out, uint64_t value) {
  size_t size = 0;
  do {
    out[size++] = (char)((value & 0x7f) | (value > 0x7f ? 0x80 : 0));
    value >>= 7;
  } while (value);
  return size;
}

static PJRT_Error* loaded_get_device_assignment(PJRT_LoadedExecutable_GetDeviceAssignment_Args* args) {
  const PJRT_LoadedExecutable* loaded = args->executable;
  const PJRT_Executable* executable = loaded->executable;
  size_t replicas = (size_t)executable->replica_count, partitions = (size_t)executable->partition_count;
  PJRT_DeviceAssignmentSerialized* assignment = calloc(1, sizeof(PJRT_DeviceAssignmentSerialized));
  /* every varint fits in 10 bytes; each computation adds a key, a length and a key per replica */
  assignment->bytes = malloc(24 + partitions * (12 + replicas * 11));
  char* out = assignment->bytes;
  out[0] = 0x08;
  out += 1 + write_varint(out + 1, replicas);
  out[0] = 0x10;
  out += 1 + write_varint(out + 1, partitions);
  char* ids = malloc(replicas * 11 + 1);
  for (size_t p = 0; p < partitions; ++p) {
    size_t size = 0;
    for (size_t r = 0; r < replicas; ++r) {
      ids[size++] = 0x08;
      size += write_varint(ids + size, (uint64_t)loaded->devices[r * partitions + p]->description.id);
    }
    out[0] = 0x1a;
    out += 1 + write_varint(out + 1, size);
    memcpy(out, ids, size);
    out += size;
  }
  free(ids);
  assignment->size = (size_t)(out - assignment->bytes);
  SET(args, serialized_bytes, assignment->bytes);
  SET(args, serialized_bytes_size, assignment->size);
  SET(args, serialized_device_assignment, assignment);
  SET(args, serialized_device_assignment_deleter, free_device_assignment);
  return NULL;
}

struct PJRT_SerializedExecutable {
  char* bytes;
  size_t size;
};

static void free_serialized_executable(PJRT_SerializedExecutable* serialized) {
  free(serialized->bytes);
  free(serialized);
}

/* The bridge's serialization: plan, object code, program, compile options and devices. */
static PJRT_Error* executable_serialize(PJRT_Executable_Serialize_Args* args) {
  REQUIRE_FIELD(args, serialized_executable_deleter, "PJRT_Executable_Serialize");
  const PJRT_Executable* executable = args->executable;
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  PyObject* devices = PyTuple_New((Py_ssize_t)executable->device_count);
  for (size_t d = 0; devices && d < executable->device_count; ++d)
    PyTuple_SET_ITEM(devices, (Py_ssize_t)d, PyLong_FromLong(executable->device_ids[d]));
  PyObject* data = devices ? call_bridge("serialize", "(Oy#y#O)", executable->runtime, executable->program,
                                         (Py_ssize_t)executable->program_size, executable->options,
                                         (Py_ssize_t)executable->options_size, devices)
                           : NULL;
  Py_XDECREF(devices);
  char* bytes = NULL;
  Py_ssize_t size = 0;
  PJRT_SerializedExecutable* serialized = NULL;
  if (data == NULL || PyBytes_AsStringAndSize(data, &bytes, &size) != 0) {
    error = python_error();
  } else {
    serialized = malloc(sizeof(PJRT_SerializedExecutable));
    serialized->bytes = copy_bytes(bytes, (size_t)size);
    serialized->size = (size_t)size;
  }
  Py_XDECREF(data);
  leave_python(state);
  if (error) return error;
  SET(args, serialized_bytes, serialized->bytes);
  SET(args, serialized_bytes_size, serialized->size);
  SET(args, serialized_executable, serialized);
  SET(args, serialized_executable_deleter, free_serialized_executable);
  return NULL;
}

/* What PJRT_Executable_Serialize wrote, loaded on this client; compile options given here
 * choose the devices (the code is compiled already). */
static PJRT_Error* executable_deserialize_and_load(PJRT_Executable_DeserializeAndLoad_Args* args) {
  REQUIRE_FIELD(args, loaded_executable, "PJRT_Executable_DeserializeAndLoad");
  bool overriding = HAS_FIELD(args, overridden_serialized_compile_options_size) && args->overridden_serialized_compile_options != NULL;
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  PyObject* options = Py_None;
  Py_INCREF(options);
  if (overriding) {
    Py_DECREF(options);
    options = PyBytes_FromStringAndSize(args->overridden_serialized_compile_options,
                                        (Py_ssize_t)args->overridden_serialized_compile_options_size);
  }
  PyObject* made = options ? call_bridge("deserialize", "(Oy#O)", args->client->runtime, args->serialized_executable,
                                         (Py_ssize_t)args->serialized_executable_size, options)
                           : NULL;
  Py_XDECREF(options);
  PJRT_LoadedExecutable* loaded = NULL;
  error = made ? load_executable(args->client, made, &loaded) : python_error();
  Py_XDECREF(made);
  leave_python(state);
  if (error) return error;
  SET(args, loaded_executable, loaded);
  return NULL;
}

static PJRT_Error* executable_name(PJRT_Executable_Name_Args* args) {
  SET(args, executable_name, args->executable->name);
  SET(args, executable_name_size, strlen(args->executable->name));
  return NULL;
}

static PJRT_Error* executable_fingerprint(PJRT_Executable_Fingerprint_Args* args) {
  SET(args, executable_fingerprint, args->executable->fingerprint);
  SET(args, executable_fingerprint_size, strlen(args->executable->fingerprint));
  return NULL;
}

static PJRT_Error* executable_num_replicas(PJRT_Executable_NumReplicas_Args* args) {
  SET(args, num_replicas, (size_t)args->executable->replica_count);
  return NULL;
}

static PJRT_Error* executable_num_partitions(PJRT_Executable_NumPartitions_Args* args) {
  SET(args, num_partitions, (size_t)args->executable->partition_count);
  return NULL;
}

static PJRT_Error* executable_num_outputs(PJRT_Executable_NumOutputs_Args* args) {
  SET(args, num_outputs, args->executable->output_count);
  return NULL;
}

static PJRT_Error* executable_output_element_types(PJRT_Executable_OutputElementTypes_Args* args) {
  SET(args, output_types, args->executable->output_types);
  SET(args, num_output_types, args->executable->output_count);
  return NULL;
}

static PJRT_Error* executable_output_dimensions(PJRT_Executable_OutputDimensions_Args* args) {
  SET(args, num_outputs, args->executable->output_count);
  SET(args, dims, args->executable->output_dims);
  SET(args, dim_sizes, args->executable->output_ranks);
  return NULL;
}

static PJRT_Error* executable_output_memory_kinds(PJRT_Executable_OutputMemoryKinds_Args* args) {
  SET(args, num_outputs, args->executable->output_count);
  SET(args, memory_kinds, args->executable->memory_kinds);
  SET(args, memory_kind_sizes, args->executable->memory_kind_sizes);
  return NULL;
}

static PJRT_Error* executable_code_size(PJRT_Executable_SizeOfGeneratedCodeInBytes_Args* args) {
  SET(args, size_in_bytes, 0);
  return NULL;
}

/* The bridge's [(name, value)] as float properties the executable owns; GIL held. */
static PJRT_Error* analyze_cost(PJRT_Executable* executable) {
  PyObject* properties = call_bridge("cost_analysis", "(y#y#)", executable->program, (Py_ssize_t)executable->program_size,
                                     executable->options, (Py_ssize_t)executable->options_size);
  if (properties == NULL || !PyList_Check(properties)) {
    if (properties != NULL) PyErr_SetString(PyExc_TypeError, "the bridge's cost analysis is not a list");
    Py_XDECREF(properties);
    return python_error();
  }
  size_t count = (size_t)PyList_Size(properties);
  PJRT_NamedValue* values = calloc(count + 1, sizeof(PJRT_NamedValue));
  size_t filled = 0;
  for (; filled < count; ++filled) {
    const char* name = NULL;
    double value = 0;
    if (!PyArg_ParseTuple(PyList_GetItem(properties, (Py_ssize_t)filled), "sd", &name, &value)) break;
    PJRT_NamedValue* property = &values[filled];
    property->struct_size = PJRT_NamedValue_STRUCT_SIZE;
    property->name = copy_string(name);
    property->name_size = strlen(name);
    property->type = PJRT_NamedValue_kFloat;
    property->float_value = (float)value;
    property->value_size = 1;
  }
  Py_DECREF(properties);
  if (filled < count) {
    for (size_t i = 0; i < filled; ++i) free((char*)values[i].name);
    free(values);
    return python_error();
  }
  executable->cost_properties = values;
  executable->cost_property_count = count;
  executable->cost_analyzed = true;
  return NULL;
}

/* flops, transcendentals and bytes accessed, as XLA's cost analysis counts them over the
 * optimized module: computed on the first request (the bridge compiles the program again up
 * to its optimized module), then kept with the executable. */
static PJRT_Error* executable_cost_analysis(PJRT_Executable_GetCostAnalysis_Args* args) {
  PJRT_Executable* executable = args->executable;
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  if (!executable->cost_analyzed) error = analyze_cost(executable);
  leave_python(state);
  if (error) return error;
  SET(args, num_properties, executable->cost_property_count);
  SET(args, properties, executable->cost_properties);
  return NULL;
}

/* The program as JAX gave it (StableHLO, format "mlir"), from which jax prints HLO for
 * `compiled.as_text()`; mlirxla's optimized module is xhlo, which HLO tools cannot read (the
 * dump has it). The caller asks for the size first (code NULL), then for the bytes. */
static PJRT_Error* executable_optimized_program(PJRT_Executable_OptimizedProgram_Args* args) {
  static const char format[] = "mlir";
  PJRT_Program* program = args->program;
  const PJRT_Executable* executable = args->executable;
  program->format = format;
  program->format_size = strlen(format);
  if (program->code == NULL) {
    program->code_size = executable->program_size;
    return NULL;
  }
  if (program->code_size < executable->program_size)
    return new_error(PJRT_Error_Code_INVALID_ARGUMENT, "mlirxla: PJRT_Executable_OptimizedProgram: %zu bytes given for %zu",
                     program->code_size, executable->program_size);
  memcpy(program->code, executable->program, executable->program_size);
  program->code_size = executable->program_size;
  return NULL;
}

static PJRT_Error* executable_memory_stats(PJRT_Executable_GetCompiledMemoryStats_Args* args) {
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  long long code = 0, arguments = 0, outputs = 0, aliased = 0, temps = 0;
  PyObject* stats = call_bridge("memory_stats", "(O)", args->executable->runtime);
  if (stats == NULL || !PyArg_ParseTuple(stats, "LLLLL", &code, &arguments, &outputs, &aliased, &temps)) error = python_error();
  Py_XDECREF(stats);
  leave_python(state);
  if (error) return error;
  SET(args, generated_code_size_in_bytes, code);
  SET(args, argument_size_in_bytes, arguments);
  SET(args, output_size_in_bytes, outputs);
  SET(args, alias_size_in_bytes, aliased);
  SET(args, temp_size_in_bytes, temps);
  SET(args, peak_memory_in_bytes, arguments + outputs + temps - aliased);
  SET(args, total_size_in_bytes, arguments + outputs + temps - aliased);
  return NULL;
}

/* Whether argument `index` is donated: an output may take its buffer over and JAX did not
 * mark it non-donatable. */
static bool is_donated(const PJRT_Executable* executable, const PJRT_ExecuteOptions* options, int64_t index) {
  bool donatable = false;
  for (size_t i = 0; i < executable->donatable_count; ++i) donatable |= executable->donatable[i] == index;
  if (!donatable) return false;
  if (options != NULL && HAS_FIELD(options, num_non_donatable_input_indices))
    for (size_t i = 0; i < options->num_non_donatable_input_indices; ++i)
      if (options->non_donatable_input_indices[i] == index) return false;
  return true;
}

/* A donated argument's buffer is written by the execution, so it may not also be another
 * argument of the same call (XLA refuses `f(a, donate(a))` and `f(donate(a), donate(a))`
 * likewise): the other use would read what the execution overwrites. */
static PJRT_Error* shared_donation(const PJRT_Executable* executable, const PJRT_ExecuteOptions* options, PJRT_Buffer* const* arguments,
                                   size_t argument_count, size_t device) {
  for (size_t i = 0; i < argument_count; ++i) {
    if (!is_donated(executable, options, (int64_t)i)) continue;
    for (size_t j = 0; j < argument_count; ++j)
      if (j != i && arguments[j] == arguments[i])
        return new_error(PJRT_Error_Code_INVALID_ARGUMENT,
                         "mlirxla: argument %zu of %s on its device %zu is donated and is also argument %zu of the same call "
                         "(like f(a, donate(a))): a donated buffer is overwritten by the execution",
                         i, executable->name, device, j);
  }
  return NULL;
}

/* One device's arguments as the bridge takes them, with the GIL held: new lists of their
 * arrays, their addresses and the indices of those donated. */
static void argument_lists(const PJRT_Executable* executable, const PJRT_ExecuteOptions* options, PJRT_Buffer* const* arguments,
                           size_t argument_count, PyObject** arrays, PyObject** addresses, PyObject** donated) {
  *arrays = PyList_New((Py_ssize_t)argument_count);
  *addresses = PyList_New((Py_ssize_t)argument_count);
  *donated = PyList_New(0);
  for (size_t i = 0; i < argument_count; ++i) {
    Py_INCREF(arguments[i]->array);
    PyList_SET_ITEM(*arrays, (Py_ssize_t)i, arguments[i]->array);
    PyList_SET_ITEM(*addresses, (Py_ssize_t)i, PyLong_FromUnsignedLongLong((unsigned long long)arguments[i]->address));
    if (is_donated(executable, options, (int64_t)i)) {
      PyObject* index = PyLong_FromSize_t(i);
      PyList_Append(*donated, index);
      Py_DECREF(index);
    }
  }
}

/* Output buffers on `device` for one device's results (a list of arrays), with the GIL held;
 * on failure none are left. */
static PJRT_Error* output_buffers(const PJRT_Executable* executable, PyObject* results, PJRT_Buffer** outputs, PJRT_Device* device) {
  if (!PyList_Check(results) || (size_t)PyList_Size(results) != executable->output_count) {
    PyErr_SetString(PyExc_RuntimeError, "the bridge returned the wrong number of outputs");
    return python_error();
  }
  for (size_t k = 0; k < executable->output_count; ++k) {
    PyObject* array = PyList_GetItem(results, (Py_ssize_t)k);
    Py_INCREF(array);
    outputs[k] = new_buffer(array, executable->output_types[k], device);
    if (outputs[k]) outputs[k]->memory = &device->spaces[executable->output_memory[k]];
    if (outputs[k] == NULL) {
      Py_DECREF(array);
      PJRT_Error* error = python_error();
      for (size_t made = 0; made < k; ++made) free_buffer(outputs[made]);
      return error;
    }
  }
  return NULL;
}

/* The donated arguments are consumed: their buffers now belong to the outputs. */
static void consume_donated(const PJRT_Executable* executable, const PJRT_ExecuteOptions* options, PJRT_Buffer* const* arguments,
                            size_t argument_count) {
  for (size_t i = 0; i < argument_count; ++i)
    if (is_donated(executable, options, (int64_t)i)) {
      arguments[i]->deleted = true;
      drop_array(arguments[i]);
    }
}

/* Whether a profile records thunk by thunk (`thunks.observe`): its observer then times every
 * thunk of the Python walk, so no execution runs natively. */
static bool thunks_observed(void) {
  static PyObject* thunks_globals = NULL;
  if (thunks_globals == NULL) {
    PyObject* module = PyImport_ImportModule("mlirxla.runtime.thunks");
    if (module == NULL) {
      PyErr_Clear();
      return true;
    }
    thunks_globals = PyModule_GetDict(module);
    Py_INCREF(thunks_globals);
    Py_DECREF(module);
  }
  PyObject* observer = PyDict_GetItemString(thunks_globals, "_observer"); /* borrowed */
  return observer != NULL && observer != Py_None;
}

/* One device's execution by the executable's native plan, with the GIL held: its outputs made
 * by the plan's makers into `outputs`, its temps allocated, the address table filled, the code
 * run with the GIL released (as ctypes runs it on the Python path). On failure no output is
 * left. */
static PJRT_Error* execute_natively(const PJRT_Executable* executable, PJRT_Buffer* const* arguments, size_t argument_count,
                                    PJRT_Buffer** outputs, PJRT_Device* device) {
  const NativePlan* plan = executable->native;
  int64_t stack[STACK_ALLOCATIONS];
  int64_t* bases = plan->allocation_count <= STACK_ALLOCATIONS ? stack : malloc(plan->allocation_count * sizeof(int64_t));
  memcpy(bases, plan->template, plan->allocation_count * sizeof(int64_t));
  for (size_t i = 0; i < argument_count; ++i) bases[i] = (int64_t)arguments[i]->address;
  PJRT_Error* error = NULL;
  void* temps[MAX_TEMPS] = {NULL};
  for (size_t t = 0; !error && t < plan->temp_count; ++t) {
    temps[t] = aligned_alloc(TEMP_ALIGNMENT, plan->temp_bytes[t]);
    if (temps[t] == NULL)
      error = new_error(PJRT_Error_Code_RESOURCE_EXHAUSTED, "mlirxla: %s: no memory for its %zu bytes of temps", executable->name,
                        plan->temp_bytes[t]);
    bases[plan->temp_allocations[t]] = (int64_t)(intptr_t)temps[t];
  }
  for (size_t k = 0; !error && k < plan->output_count; ++k) {
    PyObject* array = PyObject_CallNoArgs(PyTuple_GET_ITEM(plan->output_makers, (Py_ssize_t)k));
    outputs[k] = array ? new_buffer(array, executable->output_types[k], device) : NULL;
    if (outputs[k] == NULL) {
      Py_XDECREF(array);
      error = python_error();
      for (size_t made = 0; made < k; ++made) free_buffer(outputs[made]);
    } else {
      outputs[k]->memory = &device->spaces[executable->output_memory[k]];
      bases[plan->output_allocations[k]] = (int64_t)outputs[k]->address;
    }
  }
  if (!error) {
    Py_BEGIN_ALLOW_THREADS
    if (plan->driver != NULL) {
      plan->driver(bases, plan->driver_imports);
    } else {
      for (size_t i = 0; i < plan->step_count; ++i) run_step(&plan->steps[i], bases);
    }
    Py_END_ALLOW_THREADS
  }
  for (size_t t = 0; t < plan->temp_count; ++t) free(temps[t]);
  if (bases != stack) free(bases);
  return error;
}

/* An execution on `device_count` devices at once, with the GIL held: argument_lists[d] in,
 * output_lists[d] out, on devices[d]. One device runs in the calling thread (bridge.execute);
 * several run one thread per device in the bridge (their collectives meet there). The outputs
 * are made and the donated arguments consumed only when every device succeeded. */
static PJRT_Error* execute_devices(PJRT_LoadedExecutable* loaded, const PJRT_ExecuteOptions* options, PJRT_Buffer* const* const* argument_lists_in,
                                   size_t argument_count, PJRT_Buffer** const* output_lists, PJRT_Device** devices, size_t device_count) {
  PJRT_Executable* executable = loaded->executable;
  if (loaded->device_count == 1 && executable->native != NULL && arguments_match(executable, argument_lists_in[0], argument_count) &&
      !thunks_observed()) {
    PJRT_Error* error = execute_natively(executable, argument_lists_in[0], argument_count, output_lists[0], devices[0]);
    if (!error) consume_donated(executable, options, argument_lists_in[0], argument_count);
    return error;
  }
  PyObject* arrays = PyList_New((Py_ssize_t)device_count);
  PyObject* addresses = PyList_New((Py_ssize_t)device_count);
  PyObject* donated = PyList_New((Py_ssize_t)device_count);
  for (size_t d = 0; d < device_count; ++d) {
    PyObject *device_arrays, *device_addresses, *device_donated;
    argument_lists(executable, options, argument_lists_in[d], argument_count, &device_arrays, &device_addresses, &device_donated);
    PyList_SET_ITEM(arrays, (Py_ssize_t)d, device_arrays);
    PyList_SET_ITEM(addresses, (Py_ssize_t)d, device_addresses);
    PyList_SET_ITEM(donated, (Py_ssize_t)d, device_donated);
  }
  PyObject* results = NULL;
  if (loaded->device_count == 1) {
    /* buffers of the parameters' types skip the bridge's checks; others get its error */
    const char* entry = arguments_match(executable, argument_lists_in[0], argument_count) ? "execute_checked" : "execute";
    PyObject* only = call_bridge(entry, "(OOOO)", executable->runtime, PyList_GetItem(arrays, 0), PyList_GetItem(addresses, 0),
                                 PyList_GetItem(donated, 0));
    results = only ? Py_BuildValue("[N]", only) : NULL;
  } else {
    results = call_bridge("execute_devices", "(OOOOOO)", executable->runtime, arrays, addresses, donated,
                          loaded->addressable_positions, loaded->device_ids);
  }
  Py_DECREF(arrays);
  Py_DECREF(addresses);
  PJRT_Error* error = NULL;
  if (results == NULL) {
    error = python_error();
  } else if (!PyList_Check(results) || (size_t)PyList_Size(results) != device_count) {
    PyErr_SetString(PyExc_RuntimeError, "the bridge returned outputs for the wrong number of devices");
    error = python_error();
  }
  size_t done = 0;
  for (; !error && done < device_count; ++done)
    error = output_buffers(executable, PyList_GetItem(results, (Py_ssize_t)done), output_lists[done], devices[done]);
  if (error) {
    for (size_t d = 0; d + 1 < done; ++d)
      for (size_t k = 0; k < executable->output_count; ++k) free_buffer(output_lists[d][k]);
  } else {
    for (size_t d = 0; d < device_count; ++d) consume_donated(executable, options, argument_lists_in[d], argument_count);
  }
  Py_XDECREF(results);
  Py_DECREF(donated);
  return error;
}

static PJRT_Error* loaded_execute(PJRT_LoadedExecutable_Execute_Args* args) {
  REQUIRE_FIELD(args, device_complete_events, "PJRT_LoadedExecutable_Execute");
  PJRT_LoadedExecutable* loaded = args->executable;
  PJRT_Executable* executable = loaded->executable;
  if (loaded->deleted) return new_error(PJRT_Error_Code_FAILED_PRECONDITION, "mlirxla: execute of a deleted executable");
  if (args->num_devices != loaded->addressable_count)
    return new_error(PJRT_Error_Code_INVALID_ARGUMENT, "mlirxla: %s runs on %zu device(s) of this process, Execute was given argument lists for %zu",
                     executable->name, loaded->addressable_count, args->num_devices);
  for (size_t d = 0; d < args->num_devices; ++d)
    for (size_t i = 0; i < args->num_args; ++i)
      if (is_gone(args->argument_lists[d][i]))
        return new_error(PJRT_Error_Code_INVALID_ARGUMENT, "mlirxla: argument %zu of %s on its device %zu is a deleted (or donated) buffer",
                         i, executable->name, d);
  for (size_t d = 0; d < args->num_devices; ++d) {
    PJRT_Error* shared = shared_donation(executable, args->options, args->argument_lists[d], args->num_args, d);
    if (shared) return shared;
  }
  PJRT_Device* only = HAS_FIELD(args, execute_device) && args->execute_device ? args->execute_device : loaded->devices[0];
  PyGILState_STATE state = PyGILState_UNLOCKED;
  PJRT_Error* error = enter_python(&state);
  if (error) return error;
  error = execute_devices(loaded, args->options, args->argument_lists, args->num_args, args->output_lists,
                          loaded->device_count == 1 ? &only : loaded->addressable, args->num_devices);
  leave_python(state);
  if (error) return error;
  if (args->device_complete_events != NULL)
    for (size_t d = 0; d < args->num_devices; ++d) args->device_complete_events[d] = ready_event();
  return NULL;
}

/* ---------------------------------------------------------- layouts extension */

/* XLA's PJRT layouts extension (pjrt_c_api_layouts_extension.h, version 4), declared here as
 * the header of version 0.90 has only its type. Through it jaxlib asks an executable for its
 * output layouts (the parameters' too from API version 0.93) instead of converting the whole
 * program to HLO for them (GetHloModules: 2 ms for a small program, 11 for a 40-layer MLP's
 * gradient, every compile). jaxlib calls the buffer and client entries without checking them,
 * so every entry is set. A layout serializes as XLA's Layout::ToString writes it, "{1,0}",
 * which is what jaxlib parses. */
struct PJRT_Layouts_SerializedLayout {
  size_t size;
  char text[];
};
typedef struct PJRT_Layouts_SerializedLayout PJRT_Layouts_SerializedLayout;

typedef struct {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Layouts_MemoryLayout* layout;
} PJRT_Layouts_MemoryLayout_Destroy_Args;

typedef struct {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Layouts_MemoryLayout* layout;
  const char* serialized_bytes;                 /* out */
  size_t serialized_bytes_size;                 /* out */
  PJRT_Layouts_SerializedLayout* serialized_layout; /* out */
  void (*serialized_layout_deleter)(PJRT_Layouts_SerializedLayout*); /* out */
} PJRT_Layouts_MemoryLayout_Serialize_Args;

typedef struct {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Client* client;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Layouts_MemoryLayout* layout; /* out */
} PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args;

typedef struct {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Buffer* buffer;
  PJRT_Layouts_MemoryLayout* layout; /* out */
} PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args;

typedef struct {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_TopologyDescription* topology_description;
  PJRT_Buffer_Type type;
  const int64_t* dims;
  size_t num_dims;
  PJRT_Layouts_MemoryLayout* layout; /* out */
} PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args;

typedef struct {
  size_t struct_size;
  PJRT_Extension_Base* extension_start;
  PJRT_Executable* executable;
  size_t count;                        /* out: num_outputs or num_parameters */
  PJRT_Layouts_MemoryLayout** layouts; /* out */
} PJRT_Layouts_PJRT_Executable_Layouts_Args;

typedef struct {
  size_t struct_size;
  PJRT_Extension_Type type;
  PJRT_Extension_Base* next;
  PJRT_Error* (*memory_layout_destroy)(PJRT_Layouts_MemoryLayout_Destroy_Args*);
  PJRT_Error* (*memory_layout_serialize)(PJRT_Layouts_MemoryLayout_Serialize_Args*);
  PJRT_Error* (*client_default_layout)(PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args*);
  PJRT_Error* (*buffer_memory_layout)(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args*);
  PJRT_Error* (*topology_default_layout)(PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args*);
  PJRT_Error* (*executable_output_layouts)(PJRT_Layouts_PJRT_Executable_Layouts_Args*);
  PJRT_Error* (*executable_parameter_layouts)(PJRT_Layouts_PJRT_Executable_Layouts_Args*);
} PJRT_Layouts_Extension;

static PJRT_Error* layout_destroy(PJRT_Layouts_MemoryLayout_Destroy_Args* args) {
  if (args->layout != NULL && !args->layout->owned_by_executable) free(args->layout);
  return NULL;
}

static void serialized_layout_delete(PJRT_Layouts_SerializedLayout* serialized) { free(serialized); }

/* "{rank-1,...,1,0}": at most 20 characters a dimension. */
static PJRT_Error* layout_serialize(PJRT_Layouts_MemoryLayout_Serialize_Args* args) {
  size_t rank = args->layout->rank, capacity = 3 + 21 * rank;
  PJRT_Layouts_SerializedLayout* serialized = malloc(sizeof(PJRT_Layouts_SerializedLayout) + capacity);
  size_t size = 0;
  serialized->text[size++] = '{';
  for (size_t i = 0; i < rank; ++i)
    size += (size_t)snprintf(serialized->text + size, capacity - size, i + 1 < rank ? "%zu," : "%zu", rank - 1 - i);
  serialized->text[size++] = '}';
  serialized->text[size] = '\0';
  serialized->size = size;
  args->serialized_bytes = serialized->text;
  args->serialized_bytes_size = size;
  args->serialized_layout = serialized;
  args->serialized_layout_deleter = serialized_layout_delete;
  return NULL;
}

static PJRT_Error* client_default_layout(PJRT_Layouts_PJRT_Client_GetDefaultLayout_Args* args) {
  args->layout = new_layout(args->num_dims, false);
  return NULL;
}

static PJRT_Error* buffer_memory_layout(PJRT_Layouts_PJRT_Buffer_MemoryLayout_Args* args) {
  args->layout = new_layout(args->buffer->rank, false);
  return NULL;
}

static PJRT_Error* topology_default_layout(PJRT_Layouts_PJRT_Topology_GetDefaultLayout_Args* args) {
  args->layout = new_layout(args->num_dims, false);
  return NULL;
}

static PJRT_Error* executable_output_layouts(PJRT_Layouts_PJRT_Executable_Layouts_Args* args) {
  args->count = args->executable->output_count;
  args->layouts = args->executable->output_layouts;
  return NULL;
}

static PJRT_Error* executable_parameter_layouts(PJRT_Layouts_PJRT_Executable_Layouts_Args* args) {
  args->count = args->executable->parameter_count;
  args->layouts = args->executable->parameter_layouts;
  return NULL;
}

static PJRT_Layouts_Extension layouts_extension = {
    .struct_size = sizeof(PJRT_Layouts_Extension),
    .type = PJRT_Extension_Type_Layouts,
    .next = NULL,
    .memory_layout_destroy = layout_destroy,
    .memory_layout_serialize = layout_serialize,
    .client_default_layout = client_default_layout,
    .buffer_memory_layout = buffer_memory_layout,
    .topology_default_layout = topology_default_layout,
    .executable_output_layouts = executable_output_layouts,
    .executable_parameter_layouts = executable_parameter_layouts,
};

/* --------------------------------------------------------- profiler extension */

/* jax asks every plugin it registers for the PJRT profiler extension and, when one is there,
 * drives it with jax.profiler.trace: create, start, stop, collect the events as a serialized
 * XSpace (which jax merges into its own), destroy. The layouts are XLA's plugin profiler API
 * (xla/backends/profiler/plugin/profiler_c_api.h, PLUGIN_PROFILER_VERSION 1) and its PJRT
 * extension (xla/pjrt/c/pjrt_c_api_profiler_extension.h, version 1), restated: the header the
 * build fetches has neither. Each profiler holds a `report/xspace.py` JaxProfilerFeed. */

typedef struct PLUGIN_Profiler_Error {
  int code; /* absl::StatusCode */
  char* message;
} PLUGIN_Profiler_Error;

typedef struct PLUGIN_Profiler {
  PyObject* feed;
  char* data; /* the last collected XSpace */
  size_t size;
} PLUGIN_Profiler;

typedef struct {
  size_t struct_size;
  void* priv;
  PLUGIN_Profiler_Error* error;
} PLUGIN_Profiler_Error_Destroy_Args;

typedef struct {
  size_t struct_size;
  void* priv;
  const PLUGIN_Profiler_Error* error;
  const char* message; /* out */
  size_t message_size; /* out */
} PLUGIN_Profiler_Error_Message_Args;

typedef struct {
  size_t struct_size;
  void* priv;
  const PLUGIN_Profiler_Error* error;
  int code; /* out */
} PLUGIN_Profiler_Error_GetCode_Args;

typedef struct {
  size_t struct_size;
  const char* options; /* a serialized tensorflow.ProfileOptions */
  size_t options_size;
  PLUGIN_Profiler* profiler; /* out */
} PLUGIN_Profiler_Create_Args;

typedef struct {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
} PLUGIN_Profiler_Session_Args; /* Destroy, Start and Stop */

typedef struct {
  size_t struct_size;
  PLUGIN_Profiler* profiler;
  uint8_t* buffer;             /* in/out */
  size_t buffer_size_in_bytes; /* out */
} PLUGIN_Profiler_CollectData_Args;

typedef struct {
  size_t struct_size;
  void* priv;
  void (*error_destroy)(PLUGIN_Profiler_Error_Destroy_Args*);
  void (*error_message)(PLUGIN_Profiler_Error_Message_Args*);
  PLUGIN_Profiler_Error* (*error_get_code)(PLUGIN_Profiler_Error_GetCode_Args*);
  PLUGIN_Profiler_Error* (*create)(PLUGIN_Profiler_Create_Args*);
  PLUGIN_Profiler_Error* (*destroy)(PLUGIN_Profiler_Session_Args*);
  PLUGIN_Profiler_Error* (*start)(PLUGIN_Profiler_Session_Args*);
  PLUGIN_Profiler_Error* (*stop)(PLUGIN_Profiler_Session_Args*);
  PLUGIN_Profiler_Error* (*collect_data)(PLUGIN_Profiler_CollectData_Args*);
} PLUGIN_Profiler_Api;

typedef struct {
  size_t struct_size;
  PJRT_Extension_Type type;
  PJRT_Extension_Base* next;
  PLUGIN_Profiler_Api* profiler_api;
  int64_t traceme_context_id; /* only for the extension passed as an argument */
} PJRT_Profiler_Extension;

enum { kStatusInternal = 13, kStatusFailedPrecondition = 9 };

/* A profiler error from a PJRT one (the pending Python exception, or shutdown). */
static PLUGIN_Profiler_Error* profiler_error(PJRT_Error* from) {
  PLUGIN_Profiler_Error* error = malloc(sizeof(PLUGIN_Profiler_Error));
  error->code = from->code == PJRT_Error_Code_FAILED_PRECONDITION ? kStatusFailedPrecondition : kStatusInternal;
  error->message = from->message;
  free(from);
  return error;
}

static void profiler_error_destroy(PLUGIN_Profiler_Error_Destroy_Args* args) {
  if (args->error == NULL) return;
  free(args->error->message);
  free(args->error);
}

static void profiler_error_message(PLUGIN_Profiler_Error_Message_Args* args) {
  args->message = args->error->message;
  args->message_size = strlen(args->error->message);
}

static PLUGIN_Profiler_Error* profiler_error_get_code(PLUGIN_Profiler_Error_GetCode_Args* args) {
  args->code = args->error->code;
  return NULL;
}

static PLUGIN_Profiler_Error* profiler_create(PLUGIN_Profiler_Create_Args* args) {
  PyGILState_STATE state;
  PJRT_Error* error = enter_python(&state);
  if (error) return profiler_error(error);
  PyObject* feed = call_bridge("profiler_create", "(y#)", args->options ? args->options : "",
                               (Py_ssize_t)(args->options ? args->options_size : 0));
  if (feed == NULL) error = python_error();
  leave_python(state);
  if (error) return profiler_error(error);
  PLUGIN_Profiler* profiler = calloc(1, sizeof(PLUGIN_Profiler));
  profiler->feed = feed;
  args->profiler = profiler;
  return NULL;
}

static PLUGIN_Profiler_Error* profiler_destroy(PLUGIN_Profiler_Session_Args* args) {
  if (args->profiler == NULL) return NULL;
  release_object(args->profiler->feed);
  free(args->profiler->data);
  free(args->profiler);
  return NULL;
}

/* bridge.<name>(feed), its result dropped. */
static PLUGIN_Profiler_Error* profiler_call(const char* name, PLUGIN_Profiler* profiler) {
  PyGILState_STATE state;
  PJRT_Error* error = enter_python(&state);
  if (error) return profiler_error(error);
  PyObject* result = call_bridge(name, "(O)", profiler->feed);
  if (result == NULL) error = python_error();
  Py_XDECREF(result);
  leave_python(state);
  return error ? profiler_error(error) : NULL;
}

static PLUGIN_Profiler_Error* profiler_start(PLUGIN_Profiler_Session_Args* args) {
  return profiler_call("profiler_start", args->profiler);
}

static PLUGIN_Profiler_Error* profiler_stop(PLUGIN_Profiler_Session_Args* args) {
  return profiler_call("profiler_stop", args->profiler);
}

/* Called with no buffer, it collects and hands out the profiler's own copy (jax reads that
 * one); called again with a buffer, it copies the same bytes there. */
static PLUGIN_Profiler_Error* profiler_collect_data(PLUGIN_Profiler_CollectData_Args* args) {
  PLUGIN_Profiler* profiler = args->profiler;
  if (args->buffer != NULL) {
    if (profiler->data != NULL) memcpy(args->buffer, profiler->data, profiler->size);
    args->buffer_size_in_bytes = profiler->size;
    return NULL;
  }
  PyGILState_STATE state;
  PJRT_Error* error = enter_python(&state);
  if (error) return profiler_error(error);
  PyObject* data = call_bridge("profiler_collect", "(O)", profiler->feed);
  char* bytes = NULL;
  Py_ssize_t size = 0;
  if (data == NULL || PyBytes_AsStringAndSize(data, &bytes, &size) != 0) {
    error = python_error();
  } else {
    free(profiler->data);
    profiler->data = malloc(size > 0 ? (size_t)size : 1);
    memcpy(profiler->data, bytes, (size_t)size);
    profiler->size = (size_t)size;
  }
  Py_XDECREF(data);
  leave_python(state);
  if (error) return profiler_error(error);
  args->buffer = (uint8_t*)profiler->data;
  args->buffer_size_in_bytes = profiler->size;
  return NULL;
}

static PLUGIN_Profiler_Api profiler_api = {
    .struct_size = sizeof(PLUGIN_Profiler_Api),
    .error_destroy = profiler_error_destroy,
    .error_message = profiler_error_message,
    .error_get_code = profiler_error_get_code,
    .create = profiler_create,
    .destroy = profiler_destroy,
    .start = profiler_start,
    .stop = profiler_stop,
    .collect_data = profiler_collect_data,
};

static PJRT_Profiler_Extension profiler_extension = {
    .struct_size = sizeof(PJRT_Profiler_Extension),
    .type = PJRT_Extension_Type_Profiler,
    .next = (PJRT_Extension_Base*)&layouts_extension,
    .profiler_api = &profiler_api,
};

/* ------------------------------------------------------------------- table */

#define PJRT_API_FUNCTION(name)                                                                    \
  static PJRT_Error* unimplemented_##name(name##_Args* args) {                                     \
    (void)args;                                                                                   \
    return new_error(PJRT_Error_Code_UNIMPLEMENTED, "mlirxla does not implement " #name " yet"); \
  }
#include "pjrt_api_functions.inc"
#undef PJRT_API_FUNCTION

static PJRT_Api api;

static void fill_table(void) {
  api.struct_size = PJRT_Api_STRUCT_SIZE;
  api.pjrt_api_version.struct_size = PJRT_Api_Version_STRUCT_SIZE;
  api.pjrt_api_version.major_version = PJRT_API_MAJOR;
  api.pjrt_api_version.minor_version = PJRT_API_MINOR;
  api.extension_start = (PJRT_Extension_Base*)&profiler_extension;
/* (the cast only matters for the two functions returning void, implemented below) */
#define PJRT_API_FUNCTION(name) api.name = (name*)unimplemented_##name;
#include "pjrt_api_functions.inc"
#undef PJRT_API_FUNCTION
  api.PJRT_Error_Destroy = error_destroy;
  api.PJRT_Error_Message = error_message;
  api.PJRT_Error_GetCode = error_get_code;
  api.PJRT_Plugin_Initialize = plugin_initialize;
  api.PJRT_Plugin_Attributes = plugin_attributes;
  api.PJRT_Event_Destroy = event_destroy;
  api.PJRT_Event_IsReady = event_is_ready;
  api.PJRT_Event_Error = event_error;
  api.PJRT_Event_Await = event_await;
  api.PJRT_Event_OnReady = event_on_ready;
  api.PJRT_Event_Create = event_create;
  api.PJRT_Event_Set = event_set;
  api.PJRT_Client_Create = client_create;
  api.PJRT_Client_Destroy = client_destroy;
  api.PJRT_Client_PlatformName = client_platform_name;
  api.PJRT_Client_ProcessIndex = client_process_index;
  api.PJRT_Client_UpdateGlobalProcessInfo = client_update_global_process_info;
  api.PJRT_Client_PlatformVersion = client_platform_version;
  api.PJRT_Client_Devices = client_devices;
  api.PJRT_Client_AddressableDevices = client_addressable_devices;
  api.PJRT_Client_LookupDevice = client_lookup_device;
  api.PJRT_Client_LookupAddressableDevice = client_lookup_addressable_device;
  api.PJRT_Client_AddressableMemories = client_addressable_memories;
  api.PJRT_Client_Compile = client_compile;
  api.PJRT_Client_DefaultDeviceAssignment = client_default_device_assignment;
  api.PJRT_Client_BufferFromHostBuffer = client_buffer_from_host_buffer;
  api.PJRT_Client_CreateUninitializedBuffer = client_create_uninitialized_buffer;
  api.PJRT_DeviceDescription_Id = description_id;
  api.PJRT_DeviceDescription_ProcessIndex = description_process_index;
  api.PJRT_DeviceDescription_Attributes = description_attributes;
  api.PJRT_DeviceDescription_Kind = description_kind;
  api.PJRT_DeviceDescription_DebugString = description_debug_string;
  api.PJRT_DeviceDescription_ToString = description_to_string;
  api.PJRT_Device_GetDescription = device_get_description;
  api.PJRT_Device_IsAddressable = device_is_addressable;
  api.PJRT_Device_LocalHardwareId = device_local_hardware_id;
  api.PJRT_Device_AddressableMemories = device_addressable_memories;
  api.PJRT_Device_DefaultMemory = device_default_memory;
  api.PJRT_Device_MemoryStats = device_memory_stats;
  api.PJRT_Memory_Id = memory_id;
  api.PJRT_Memory_Kind = memory_kind;
  api.PJRT_Memory_Kind_Id = memory_kind_id;
  api.PJRT_Memory_DebugString = memory_debug_string;
  api.PJRT_Memory_ToString = memory_to_string;
  api.PJRT_Memory_AddressableByDevices = memory_addressable_by_devices;
  api.PJRT_Executable_Destroy = executable_destroy;
  api.PJRT_Executable_Name = executable_name;
  api.PJRT_Executable_NumReplicas = executable_num_replicas;
  api.PJRT_Executable_NumPartitions = executable_num_partitions;
  api.PJRT_Executable_NumOutputs = executable_num_outputs;
  api.PJRT_Executable_SizeOfGeneratedCodeInBytes = executable_code_size;
  api.PJRT_Executable_GetCostAnalysis = executable_cost_analysis;
  api.PJRT_Executable_OutputElementTypes = executable_output_element_types;
  api.PJRT_Executable_OutputDimensions = executable_output_dimensions;
  api.PJRT_Executable_OutputMemoryKinds = executable_output_memory_kinds;
  api.PJRT_Executable_Fingerprint = executable_fingerprint;
  api.PJRT_Executable_GetCompiledMemoryStats = executable_memory_stats;
  api.PJRT_Executable_OptimizedProgram = executable_optimized_program;
  api.PJRT_Executable_Serialize = executable_serialize;
  api.PJRT_Executable_DeserializeAndLoad = executable_deserialize_and_load;
  api.PJRT_LoadedExecutable_Destroy = loaded_destroy;
  api.PJRT_LoadedExecutable_GetExecutable = loaded_get_executable;
  api.PJRT_LoadedExecutable_AddressableDevices = loaded_addressable_devices;
  api.PJRT_LoadedExecutable_Delete = loaded_delete;
  api.PJRT_LoadedExecutable_IsDeleted = loaded_is_deleted;
  api.PJRT_LoadedExecutable_Execute = loaded_execute;
  api.PJRT_LoadedExecutable_Fingerprint = loaded_fingerprint;
  api.PJRT_LoadedExecutable_GetDeviceAssignment = loaded_get_device_assignment;
  api.PJRT_Buffer_Destroy = buffer_destroy;
  api.PJRT_Buffer_ElementType = buffer_element_type;
  api.PJRT_Buffer_Dimensions = buffer_dimensions;
  api.PJRT_Buffer_UnpaddedDimensions = buffer_unpadded_dimensions;
  api.PJRT_Buffer_DynamicDimensionIndices = buffer_dynamic_dimension_indices;
  api.PJRT_Buffer_GetMemoryLayout = buffer_get_memory_layout;
  api.PJRT_Buffer_ToHostBuffer = buffer_to_host_buffer;
  api.PJRT_Buffer_CopyRawToHost = buffer_copy_raw_to_host;
  api.PJRT_Buffer_OnDeviceSizeInBytes = buffer_on_device_size;
  api.PJRT_Buffer_Delete = buffer_delete;
  api.PJRT_Buffer_IsDeleted = buffer_is_deleted;
  api.PJRT_Buffer_IsOnCpu = buffer_is_on_cpu;
  api.PJRT_Buffer_Device = buffer_device;
  api.PJRT_Buffer_Memory = buffer_memory;
  api.PJRT_Buffer_ReadyEvent = buffer_ready_event;
  api.PJRT_Buffer_UnsafePointer = buffer_unsafe_pointer;
  api.PJRT_Buffer_OpaqueDeviceMemoryDataPointer = buffer_opaque_pointer;
  api.PJRT_Buffer_IncreaseExternalReferenceCount = buffer_increase_references;
  api.PJRT_Buffer_DecreaseExternalReferenceCount = buffer_decrease_references;
  api.PJRT_Buffer_CopyToDevice = buffer_copy_to_device;
  api.PJRT_Buffer_CopyToMemory = buffer_copy_to_memory;
}

EXPORT const PJRT_Api* GetPjrtApi(void) {
  if (api.struct_size == 0) fill_table();
  return &api;
}
