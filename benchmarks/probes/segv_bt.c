/* LD_PRELOAD helper for benchmarks/probes/aoti_native_probe.py: on SIGSEGV/SIGABRT print the native backtrace
   (module, symbol, offset) to stderr, then die with the signal as before. The GPU machine has no gdb. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

static void on_signal(int sig) {
    void *frames[64];
    int n = backtrace(frames, 64);
    const char msg[] = "NATIVE_BACKTRACE\n";
    write(2, msg, sizeof msg - 1);
    backtrace_symbols_fd(frames, n, 2);
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    signal(SIGSEGV, on_signal);
    signal(SIGBUS, on_signal);
    signal(SIGABRT, on_signal);
}
