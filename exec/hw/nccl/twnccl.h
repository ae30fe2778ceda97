// A minimal binding of libnccl, loaded at run time with dlopen. No NCCL or
// CUDA header is included. Communicators and streams travel as uintptr_t,
// device buffers as unsigned long long. Return values are ncclResult_t.

#ifndef TWNCCL_H
#define TWNCCL_H

#include <stddef.h>
#include <stdint.h>

// twnclOpen returns 0 on success, 1 when dlopen fails and 2 when a
// required entry point is missing; err holds the reason.
int twnclOpen(const char* path, char* err, int errlen);
int twnclHas(const char* name); // whether an optional entry point was found

int twnclGetVersion(int* v);
const char* twnclGetErrorString(int r);
const char* twnclGetLastError(uintptr_t comm); // NULL when unavailable
int twnclGetUniqueId(void* out128);
int twnclCommInitRank(uintptr_t* comm, int nranks, const void* id128, int rank);
int twnclCommFinalize(uintptr_t comm);
int twnclCommDestroy(uintptr_t comm);
int twnclCommAbort(uintptr_t comm);
int twnclCommGetAsyncError(uintptr_t comm, int* asyncErr);
int twnclCommCount(uintptr_t comm, int* n);
int twnclCommCuDevice(uintptr_t comm, int* dev);
int twnclCommUserRank(uintptr_t comm, int* rank);

int twnclAllReduce(unsigned long long send, unsigned long long recv, size_t count, int dt, int op, uintptr_t comm, uintptr_t stream);
int twnclAllGather(unsigned long long send, unsigned long long recv, size_t sendcount, int dt, uintptr_t comm, uintptr_t stream);
int twnclReduceScatter(unsigned long long send, unsigned long long recv, size_t recvcount, int dt, int op, uintptr_t comm, uintptr_t stream);
int twnclBroadcast(unsigned long long send, unsigned long long recv, size_t count, int dt, int root, uintptr_t comm, uintptr_t stream);
int twnclReduce(unsigned long long send, unsigned long long recv, size_t count, int dt, int op, int root, uintptr_t comm, uintptr_t stream);
int twnclSend(unsigned long long buf, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream);
int twnclRecv(unsigned long long buf, size_t count, int dt, int peer, uintptr_t comm, uintptr_t stream);
int twnclGroupStart(void);
int twnclGroupEnd(void);

#endif
