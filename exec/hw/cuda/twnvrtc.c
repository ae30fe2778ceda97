//go:build cgo

// NVRTC trampolines. See twcuda.h.

#include "twcuda.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef void* P; // nvrtcProgram

static void* twnLib;
static int (*p_nvrtcVersion)(int*, int*);
static const char* (*p_nvrtcGetErrorString)(int);
static int (*p_nvrtcCreateProgram)(P*, const char*, const char*, int, const char* const*, const char* const*);
static int (*p_nvrtcCompileProgram)(P, int, const char* const*);
static int (*p_nvrtcGetProgramLogSize)(P, size_t*);
static int (*p_nvrtcGetProgramLog)(P, char*);
static int (*p_nvrtcGetPTXSize)(P, size_t*);
static int (*p_nvrtcGetPTX)(P, char*);
static int (*p_nvrtcGetCUBINSize)(P, size_t*); // optional (NVRTC >= 11.1)
static int (*p_nvrtcGetCUBIN)(P, char*);       // optional
static int (*p_nvrtcDestroyProgram)(P*);

// NVRTC_ERROR_INVALID_INPUT
#define TWN_INVALID_INPUT 3
#define TWN_MAX_OPTIONS 256

int twnOpen(const char* libPath, char* err, int errlen) {
	void* lib = dlopen(libPath, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		const char* e = dlerror();
		snprintf(err, errlen, "%s", e ? e : "dlopen failed");
		return 1;
	}
#define TWN_REQUIRE(name) \
	*(void**)(&p_##name) = dlsym(lib, #name); \
	if (p_##name == NULL) { snprintf(err, errlen, "%s: missing %s", libPath, #name); dlclose(lib); return 2; }
	TWN_REQUIRE(nvrtcVersion)
	TWN_REQUIRE(nvrtcGetErrorString)
	TWN_REQUIRE(nvrtcCreateProgram)
	TWN_REQUIRE(nvrtcCompileProgram)
	TWN_REQUIRE(nvrtcGetProgramLogSize)
	TWN_REQUIRE(nvrtcGetProgramLog)
	TWN_REQUIRE(nvrtcGetPTXSize)
	TWN_REQUIRE(nvrtcGetPTX)
	TWN_REQUIRE(nvrtcDestroyProgram)
#undef TWN_REQUIRE
	*(void**)(&p_nvrtcGetCUBINSize) = dlsym(lib, "nvrtcGetCUBINSize");
	*(void**)(&p_nvrtcGetCUBIN) = dlsym(lib, "nvrtcGetCUBIN");
	twnLib = lib;
	return 0;
}

int twnVersion(int* major, int* minor) { return p_nvrtcVersion(major, minor); }
const char* twnErrorString(int r) { return p_nvrtcGetErrorString(r); }
int twnHasCUBIN(void) { return p_nvrtcGetCUBINSize != NULL && p_nvrtcGetCUBIN != NULL; }

int twnCreateProgram(uintptr_t* prog, const char* src, const char* name) {
	P p = NULL;
	int r = p_nvrtcCreateProgram(&p, src, name, 0, NULL, NULL);
	*prog = (uintptr_t)p;
	return r;
}

int twnCompileProgram(uintptr_t prog, const char* opts, int nopts) {
	const char* ptrs[TWN_MAX_OPTIONS];
	if (nopts < 0 || nopts > TWN_MAX_OPTIONS) return TWN_INVALID_INPUT;
	const char* o = opts;
	for (int i = 0; i < nopts; i++) {
		ptrs[i] = o;
		o += strlen(o) + 1;
	}
	return p_nvrtcCompileProgram((P)prog, nopts, ptrs);
}

int twnGetProgramLogSize(uintptr_t prog, size_t* n) { return p_nvrtcGetProgramLogSize((P)prog, n); }
int twnGetProgramLog(uintptr_t prog, char* buf) { return p_nvrtcGetProgramLog((P)prog, buf); }
int twnGetCUBINSize(uintptr_t prog, size_t* n) { return p_nvrtcGetCUBINSize((P)prog, n); }
int twnGetCUBIN(uintptr_t prog, char* buf) { return p_nvrtcGetCUBIN((P)prog, buf); }
int twnGetPTXSize(uintptr_t prog, size_t* n) { return p_nvrtcGetPTXSize((P)prog, n); }
int twnGetPTX(uintptr_t prog, char* buf) { return p_nvrtcGetPTX((P)prog, buf); }
int twnDestroyProgram(uintptr_t prog) {
	P p = (P)prog;
	return p_nvrtcDestroyProgram(&p);
}
