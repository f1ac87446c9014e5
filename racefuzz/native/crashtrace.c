/* Native frames for a crashing worker.
 *
 * faulthandler shows where Python was when an EP faulted, but not where in the EP. This tiny
 * library, loaded into the worker after faulthandler, handles the fatal signals first: it writes
 * the native call stack of the faulting thread to stderr (glibc's backtrace), then hands the
 * signal to the handler it replaced (faulthandler's), which dumps the Python stacks and lets the
 * process die of the signal as before. racefuzz symbolises the frames afterwards, outside the
 * dying process (racefuzz/execute/native_stack.py).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_FRAMES 64
#define NATIVE_STACK_HEADER "Native stack of the faulting thread (most recent call first):"

static const int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define N_SIGNALS (sizeof(kSignals) / sizeof(kSignals[0]))
static struct sigaction previous[N_SIGNALS];

static void say(const char *text) {
  ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
  (void)ignored;
}

static void say_hex(uintptr_t value) {
  char text[2 + 2 * sizeof value + 1];
  char *end = text + sizeof text - 1;
  char *p = end;
  *p = '\0';
  do {
    *--p = "0123456789abcdef"[value & 0xf];
    value >>= 4;
  } while (value != 0);
  *--p = 'x';
  *--p = '0';
  say(p);
}

static void say_number(int value) {
  char text[12];
  char *p = text + sizeof text - 1;
  *p = '\0';
  do {
    *--p = (char)('0' + value % 10);
    value /= 10;
  } while (value != 0 && p > text);
  say(p);
}

/* One line per frame: "  #i <object>+0x<offset from its load base> (<nearest symbol>)". The
 * offset is what addr2line wants for a shared object; the nearest exported symbol may not be
 * the function (hidden ones have none), so it is only a hint. */
static void say_frame(int index, void *address) {
  Dl_info where;
  say("  #");
  say_number(index);
  say(" ");
  if (dladdr(address, &where) != 0 && where.dli_fname != NULL) {
    say(where.dli_fname);
    say("+");
    say_hex((uintptr_t)address - (uintptr_t)where.dli_fbase);
    if (where.dli_sname != NULL) {
      say(" (");
      say(where.dli_sname);
      say(")");
    }
  } else {
    say("?? ");
    say_hex((uintptr_t)address);
  }
  say("\n");
}

/* The thread that took the first fatal signal (0: none yet). Threads that fault after it wait
 * for it to end the process: if each ran the chain, one could put faulthandler's handler back
 * after faulthandler had restored the default and re-raised, and faulthandler would then catch
 * its own re-raise, printing "Fatal Python error" until the stack ran out (seen with 16 threads
 * faulting at once). */
static volatile long g_first = 0;

static void on_fatal(int sig, siginfo_t *info, void *context) {
  const long me = (long)syscall(SYS_gettid);
  const long first = __sync_val_compare_and_swap(&g_first, 0, me);
  if (first != 0 && first != me) {
    for (;;) pause(); /* the first thread's handler ends the process */
  }
  if (first == me) { /* a fault inside our own handling: die of it plainly */
    signal(sig, SIG_DFL);
    raise(sig);
    return;
  }
  void *frames[MAX_FRAMES];
  int n = backtrace(frames, MAX_FRAMES);
  say(NATIVE_STACK_HEADER "\n");
  for (int i = 1; i < n; ++i) say_frame(i - 1, frames[i]);  // frame 0 is this handler
  say("End of native stack\n");
  for (size_t i = 0; i < N_SIGNALS; ++i) {
    if (kSignals[i] != sig) continue;
    struct sigaction *prev = &previous[i];
    sigaction(sig, prev, NULL);  // the next delivery goes where it went before us
    if (prev->sa_flags & SA_SIGINFO) {
      prev->sa_sigaction(sig, info, context);
    } else if (prev->sa_handler != SIG_DFL && prev->sa_handler != SIG_IGN) {
      prev->sa_handler(sig);
    } else {
      raise(sig);  // default action: die of this signal (SA_NODEFER: delivered at once)
    }
    return;
  }
}

int racefuzz_crashtrace_install(void) {
  void *warm[2];
  backtrace(warm, 2);  // loads libgcc's unwinder now, not inside a signal handler
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_sigaction = on_fatal;
  action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&action.sa_mask);
  for (size_t i = 0; i < N_SIGNALS; ++i) {
    if (sigaction(kSignals[i], &action, &previous[i]) != 0) return -1;
  }
  return 0;
}
