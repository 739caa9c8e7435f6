"""The C example of a whole-pipeline library (``compile --library``): detect boxes in a scan.

``detect_example_files(prefix, cc)`` returns ``detect.c`` (open a handle, one ``detect`` call
on a KITTI ``.bin`` scan, one line per box: ``x y z l w h yaw score label``, the order of the
JSONL ``boxes`` then score and label) and its ``Makefile``: ``make`` builds it against the
shared library one folder up, ``make static`` against the archive, ``make run SCAN=FILE.bin``
runs it. ``LDLIBS`` adds objects or libraries to the link.
"""

from __future__ import annotations

from ...compile.cheader import macro_name

_DETECT_C = r"""/* Detect 3D boxes in one KITTI .bin scan (N x 4 float32: x, y, z, reflectance) with
 * lib@P@: prints one line per box, "x y z l w h yaw score label" (m, rad, LiDAR frame;
 * label 0-based), by descending score. Several scans: frames of one drive, in order, each
 * after a "# FILE" line.
 * Build: make    Run: ./detect scan.bin  (or make run SCAN=scan.bin) */
#include <stdio.h>
#include <stdlib.h>

#include "@P@.h"

static float *read_scan(const char *path, int *count) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) { perror(path); return NULL; }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (bytes < 0 || bytes % 16 != 0 || bytes / 16 > 0x7fffffffL) {
        fprintf(stderr, "%s: not N x 4 float32\n", path);
        fclose(f);
        return NULL;
    }
    float *points = malloc((size_t)bytes + 16);
    if (points == NULL || fread(points, 1, (size_t)bytes, f) != (size_t)bytes) {
        fprintf(stderr, "%s: cannot read\n", path);
        fclose(f);
        free(points);
        return NULL;
    }
    fclose(f);
    *count = (int)(bytes / 16);
    return points;
}

static int detect(@P@_handle *handle, const char *path, int header) {
    int count = 0;
    float *points = read_scan(path, &count);
    if (points == NULL) return 2;
    static @P@_box boxes[@M@_MAX_BOXES];
    int found = @P@_detect(handle, points, count, boxes, @M@_MAX_BOXES);
    free(points);
    if (found < 0) { fprintf(stderr, "%s: %s\n", path, @P@_strerror(found)); return 1; }
    if (header) printf("# %s\n", path);
    for (int i = 0; i < found; i++) {
        const @P@_box *b = &boxes[i];
        printf("%.9g %.9g %.9g %.9g %.9g %.9g %.9g %.9g %d\n", b->x, b->y, b->z, b->l, b->w,
               b->h, b->yaw, b->score, b->label);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s scan.bin [scan.bin ...]\n", argv[0]); return 2; }
    if (@P@_version() / 1000 != @M@_ABI_VERSION_MAJOR || @P@_check_build(@M@_BUILD_ID) != 0) {
        fprintf(stderr, "lib@P@ (ABI %d) is not the build @P@.h describes (ABI %d)\n",
                @P@_version(), @M@_ABI_VERSION);
        return 1;
    }
    @P@_handle *handle = NULL;
    int rc = @P@_open(NULL, &handle);
    if (rc < 0) { fprintf(stderr, "open: %s\n", @P@_strerror(rc)); return 1; }
    for (int i = 1; i < argc && rc == 0; i++)  /* one handle: frames in order, as a drive */
        rc = detect(handle, argv[i], argc > 2);
    @P@_close(handle);
    return rc;
}
"""

_MAKEFILE = """# Build the example against the library one folder up (the .so; `make static` links the
# .a instead); `make run SCAN=scan.bin` prints the scan's boxes.
CC = @CC@
CFLAGS ?= -O2 -Wall -Wextra -std=c11
LDLIBS ?=
SCAN ?= scan.bin

detect: detect.c ../@P@.h ../lib@P@.so
\t$(CC) $(CFLAGS) -o $@ detect.c -I.. -L.. -l@P@ $(LDLIBS) -lm -Wl,-rpath,'$$ORIGIN/..'

static: detect.c ../@P@.h ../lib@P@.a
\t$(CC) $(CFLAGS) -o detect detect.c -I.. ../lib@P@.a $(LDLIBS) -lm

run: detect
\t./detect $(SCAN)

.PHONY: run static
"""


def detect_example_files(prefix: str, cc: str) -> dict[str, bytes]:
    """``{"detect.c", "Makefile"}`` for library ``lib<prefix>`` built with compiler ``cc``."""
    fill = {"@P@": prefix, "@M@": macro_name(prefix), "@CC@": cc}
    files = {}
    for name, text in (("detect.c", _DETECT_C), ("Makefile", _MAKEFILE)):
        for key, value in fill.items():
            text = text.replace(key, value)
        files[name] = text.encode()
    return files
