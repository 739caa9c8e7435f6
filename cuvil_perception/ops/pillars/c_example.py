"""A C example for a deployment library holding the PointPillars kernels (``compile --library``).

``example_files`` returns ``example.c`` (pillarize then PFN on a KITTI ``.bin`` scan, with the
model's folded PFN weights read from ``pfn_weights.f32``), its ``Makefile`` (``make`` builds it
against the shared library one folder up; ``make run SCAN=scan.bin`` runs it) and the weights
file: float32, the [14, C] weights of ``kernel_pfn.fold_weights`` then the [C] bias (their
layout is written in the header's PFN block). What ``compile --library --kernels-only`` writes.
"""

from __future__ import annotations

import numpy as np

from ...compile.cheader import macro_name

_EXAMPLE_C = r"""/* Run the library's pillarize and PFN kernels on one KITTI .bin scan
 * (N x 4 float32: x, y, z, r).
 * Build: make  (cc -O2 -o example example.c -I.. -L.. -l@LIB@ -lm -Wl,-rpath,'$ORIGIN/..')
 * Run:   ./example scan.bin pfn_weights.f32
 * Prints the pillar counters and a summary of the [count, C] pillar features. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "@HEADER@"

#define MAX_PILLARS @PZ@_MAX_PILLARS
#define CHANNELS @PF@_CHANNELS

static void *zalloc(size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64; /* aligned_alloc wants a multiple of 64 */
    void *p = aligned_alloc(64, rounded);
    if (p == NULL) { perror("aligned_alloc"); exit(1); }
    memset(p, 0, rounded);
    return p;
}

/* The whole file as float32 values; *count gets how many. */
static float *read_floats(const char *path, size_t *count) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (bytes < 0 || bytes % 4 != 0) { fprintf(stderr, "%s: not float32 data\n", path); exit(2); }
    float *data = zalloc((size_t)bytes + 16);
    if (fread(data, 1, (size_t)bytes, f) != (size_t)bytes) { perror(path); exit(2); }
    fclose(f);
    *count = (size_t)bytes / 4;
    return data;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s scan.bin pfn_weights.f32\n", argv[0]); return 2; }
    if (@P@_check_build(@M@_BUILD_ID) != 0) {
        fprintf(stderr, "lib@LIB@ is not the build @HEADER@ describes\n");
        return 1;
    }
    size_t values, wvalues;
    float *points = read_floats(argv[1], &values);
    if (values % 4 != 0) { fprintf(stderr, "%s: not N x 4 float32\n", argv[1]); return 2; }
    float *weights = read_floats(argv[2], &wvalues);
    if (wvalues != 15 * CHANNELS) {
        fprintf(stderr, "%s: %zu values, expected 15 x %d\n", argv[2], wvalues, CHANNELS);
        return 2;
    }
    /* persistent state: zero once; the grid is -1 everywhere (all bytes 0xff) */
    float *voxels = zalloc(@PZ@_VOXELS_BYTES);
    int32_t *coords = zalloc(@PZ@_COORDS_BYTES);
    int32_t *num_points = zalloc(@PZ@_NUM_POINTS_BYTES);
    int64_t *counts = zalloc(@PZ@_COUNTS_BYTES);
    void *grid = zalloc(@PZ@_GRID_BYTES);
    memset(grid, 0xff, @PZ@_GRID_BYTES);
    int32_t *overflow = zalloc(@PZ@_OVERFLOW_BYTES);
    int32_t *cells = zalloc(@PZ@_CELLS_BYTES);
    float *features = zalloc((size_t)MAX_PILLARS * CHANNELS * sizeof(float));

    int rc = @PILLARIZE@(points, (int64_t)(values / 4), voxels, coords, num_points, counts,
                         grid, overflow, cells);
    if (rc < 0) { fprintf(stderr, "pillarize: %s\n", @P@_strerror(rc)); return 1; }
    printf("%lld points -> %lld pillars (dropped points %lld, dropped pillars %lld, "
           "invalid %lld, out of range %lld)\n", (long long)(values / 4), (long long)counts[0],
           (long long)counts[1], (long long)counts[2], (long long)counts[3],
           (long long)counts[4]);
    rc = @PFN@(voxels, coords, num_points, counts[0], weights, weights + 14 * CHANNELS,
               features);
    if (rc < 0) { fprintf(stderr, "pfn: %s\n", @P@_strerror(rc)); return 1; }
    double total = 0.0;
    float top = 0.0f;
    for (int64_t i = 0; i < counts[0] * CHANNELS; i++) {
        total += features[i];
        if (features[i] > top) top = features[i];
    }
    printf("pfn: %lld x %d features, sum %.6g, max %.6g\n", (long long)counts[0], CHANNELS,
           total, (double)top);
    return 0;
}
"""

_MAKEFILE = """# Build the example against the library one folder up (the .so; `make static` links
# the .a instead).
CC = @CC@
CFLAGS ?= -O2 -Wall -Wextra -std=c11
SCAN ?= scan.bin

example: example.c ../@HEADER@ ../lib@LIB@.so
\t$(CC) $(CFLAGS) -o $@ example.c -I.. -L.. -l@LIB@ -lm -Wl,-rpath,'$$ORIGIN/..'

static: example.c ../@HEADER@ ../lib@LIB@.a
\t$(CC) $(CFLAGS) -o example example.c -I.. ../lib@LIB@.a -lm

run: example
\t./example $(SCAN) pfn_weights.f32

.PHONY: run static
"""


def example_files(pillarize: str, pfn: str, prefix: str, cc: str, weights: np.ndarray,
                  bias: np.ndarray) -> dict[str, bytes]:
    """``{"example.c", "Makefile", "pfn_weights.f32"}`` for the exported symbols ``pillarize``
    and ``pfn`` of library ``lib<prefix>``; ``weights`` float32 [14, C], ``bias`` [C]."""
    fill = {"@PILLARIZE@": pillarize, "@PFN@": pfn, "@PZ@": macro_name(pillarize),
            "@PF@": macro_name(pfn), "@HEADER@": f"{prefix}.h", "@LIB@": prefix, "@CC@": cc,
            "@P@": prefix, "@M@": macro_name(prefix)}
    texts = {"example.c": _EXAMPLE_C, "Makefile": _MAKEFILE}
    files = {}
    for name, text in texts.items():
        for key, value in fill.items():
            text = text.replace(key, value)
        files[name] = text.encode()
    data = np.concatenate([np.asarray(weights, np.float32).ravel(),
                           np.asarray(bias, np.float32).ravel()])
    files["pfn_weights.f32"] = data.astype("<f4").tobytes()
    return files
