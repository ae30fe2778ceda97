// Package profiler records real NCCL applications into twinccl's call
// trace: it is the Go half of the NCCL profiler plugin whose C half and
// shared-library entry points live in ./plugin (built by "make plugins"
// as bin/libnccl-profiler-twinccl.so, loaded by NCCL 2.23 and later
// through NCCL_PROFILER_PLUGIN).
//
// NCCL looks up ncclProfiler_v5, then _v4, ... _v1 in the library (2.28
// looks for v5 first; 2.27 for v4; 2.26 v3; 2.24 and 2.25 v2; 2.23 v1).
// The library exports all five; each converts its descriptors to one form
// ([Event]) for the [Recorder].
//
// What is recorded, per process (one file, every communicator of it):
//
//   - one call row per collective and per send or receive: communicator
//     hash, rank and size of the communicator (from NCCL's init; the ABI
//     versions 1 to 3 give no size), collective, count and datatype as
//     the application passed them (version 5, from the API event; older
//     versions give NCCL's task's, which counts AllGather and Broadcast in
//     bytes of int8: the same bytes), root
//     (-1 for rootless collectives; the peer of a send or receive), the
//     algorithm, protocol and channels NCCL chose (model's names), the
//     stream (version 5: the API event's stream), and the times:
//     enqueue_ns when the application called NCCL (version 5; else when
//     the task was launched), start_ns and end_ns the kernel's first
//     channel start and last channel end. NCCL reports kernel channels
//     through its proxy thread with the GPU's %globaltimer; those times are
//     moved to the host's CLOCK_MONOTONIC by the smallest host-minus-GPU
//     difference seen on the communicator (the proxy sees a timestamp at
//     least that late), so durations are the GPU's exactly and start times
//     are late by at most the proxy's fastest polling delay. Without kernel
//     events (TWINCCL_PROFILER_KERNEL=0, or ABI versions 1 to 3) the times
//     are the host's: the task's launch to the end of its last proxy
//     operation, else to its launch's return.
//   - NCCL runs a single-rank communicator's collectives as a copy,
//     without a task: the profiler API reports none of them, so such a
//     communicator is listed in the metadata with no calls.
//   - Collectives are numbered 0, 1, 2, ... per communicator in launch
//     order (as every rank launches them); sends and receives as
//     [P2PCall], so that a send and its receive share a number. The global
//     rank of the process (RANK, OMPI_COMM_WORLD_RANK, PMIX_RANK or
//     SLURM_PROCID) names the file and is in its metadata with each
//     communicator's rank ([MetaComms]); [JobComms] gathers the job's
//     communicators from the metadata of all its processes' files.
//   - With TWINCCL_PROFILER_PROXY=1, proxy steps (network sends and
//     receives of the proxy thread) go to an event trace beside the call
//     trace: primitive "proxySend" or "proxyRecv", the step, its bytes,
//     its start, when its data was there (data_ns) and its end.
//
// The traces are written atomically (internal/atomicfile), whole (all
// communicators of the process), when a communicator is finalized and
// something was recorded since the last write, at the last communicator's
// finalize, and at process exit if anything changed since. Memory is bounded: at most
// TWINCCL_PROFILER_MAX_EVENTS events are kept (152 bytes each); past
// it calls are dropped, with one warning through NCCL's logger, and the
// trace counts them ([MetaDropped]). A missing or unusable
// TWINCCL_PROFILER_DIR, or a bad setting, makes init fail with a warning
// naming the variable: NCCL then runs without the profiler.
//
// A Go runtime inside NCCL's host process (Python, a C++ trainer) is a
// guest that must not disturb it. What the plugin does about it:
//
//   - Signals: the runtime of a c-shared library installs handlers only for
//     the synchronous signals (SIGSEGV, SIGBUS, SIGFPE), SIGPIPE and SIGURG,
//     and forwards any that arrive outside Go code to the handler that was
//     there before; the plugin calls no os/signal function, so SIGINT,
//     SIGTERM and the rest stay the application's. SIGURG is the
//     scheduler's preemption signal, sent only to threads running Go code
//     (with SA_RESTART); GODEBUG=asyncpreemptoff=1 in the environment
//     stops it altogether.
//   - Threads: the runtime starts its own few threads; GOMAXPROCS is 2
//     unless the environment sets it, so that the garbage collector does
//     not spread over the application's cores. NCCL's threads (the
//     application's and the proxy's) enter Go for each event the plugin
//     keeps; events it does not keep (groups, kernel launches, proxy
//     control, network plugin events) are answered in C without entering
//     Go, and times are taken in C before the call.
//   - Unloading: NCCL dlcloses the plugin when its last communicator is
//     finalized, and a Go runtime cannot be unloaded; the library is linked
//     with -z nodelete and pins itself (RTLD_NODELETE) at the first init,
//     so it stays mapped, and a later communicator finds the same state.
//   - fork: a forked child has only the forking thread, so its Go runtime
//     cannot run; the exit hook does nothing in a process other than the
//     one that initialised the plugin (NCCL itself cannot be used after a
//     fork).
//   - Static TLS: a c-shared Go library uses the initial-exec TLS model;
//     a process that has used up glibc's static TLS reserve fails to
//     dlopen it ("cannot allocate memory in static TLS block"): preload it
//     (LD_PRELOAD) or raise glibc.rtld.optional_static_tls.
package profiler
