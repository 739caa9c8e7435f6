/* Test harness for a `compile --library --prefix calls` build of the fusion pipeline's kernels
 * and the tutorial's ground removal (tests/test_library_aarch64_calls.py runs it under
 * qemu-user and compares with the host's kernels called on the same bytes).
 *
 * usage: calls_harness MANIFEST
 * One kernel call a line:  KERNEL DIR ARG...   (KERNEL: the symbol without the "calls_" prefix;
 * ARG, one per kernel argument, in order; FILE is relative to DIR):
 *   r:FILE          a buffer read from FILE (the kernel only reads it)
 *   w:FILE          a buffer read from FILE (its state before the call), written back to
 *                   FILE.out after the call
 *   t:FILE,FILE...  a table of uint64 addresses of the buffers read from those files
 *   i:INT           an int64 argument
 *   f:HEXFLOAT      a float argument (C99 hex notation: exact)
 *   d:HEXFLOAT      a double argument
 * Prints "LINE RETURN" for each call (0 for void kernels).
 */
#define _POSIX_C_SOURCE 200809L /* strtok_r */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"

#define MAX_ARGS 16
#define MAX_PARTS 8

struct arg {
    char kind;
    void *p;                /* r, w: the buffer; t: the table */
    void *parts[MAX_PARTS]; /* t: the tabled buffers */
    int nparts;
    int64_t i;
    double d;
    char file[512];
};

static void *read_file(const char *dir, const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) { perror(path); exit(2); }
    fseek(f, 0, SEEK_END);
    size_t bytes = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t rounded = (bytes + 64) / 64 * 64; /* never 0; kernels may over-read a vector */
    void *data = aligned_alloc(64, rounded);
    if (data == NULL) { perror("aligned_alloc"); exit(2); }
    memset(data, 0, rounded);
    if (fread(data, 1, bytes, f) != bytes) { perror(path); exit(2); }
    fclose(f);
    return data;
}

static void write_back(const char *dir, const struct arg *a) {
    char path[4096], probe[4096];
    snprintf(probe, sizeof probe, "%s/%s", dir, a->file);
    FILE *in = fopen(probe, "rb");
    if (in == NULL) { perror(probe); exit(2); }
    fseek(in, 0, SEEK_END);
    size_t bytes = (size_t)ftell(in);
    fclose(in);
    snprintf(path, sizeof path, "%s/%s.out", dir, a->file);
    FILE *f = fopen(path, "wb");
    if (f == NULL || (bytes && fwrite(a->p, 1, bytes, f) != bytes)) { perror(path); exit(2); }
    fclose(f);
}

static void parse(const char *dir, char *token, struct arg *a) {
    a->kind = token[0];
    a->nparts = 0;
    char *value = token + 2;
    if (a->kind == 'r' || a->kind == 'w') {
        snprintf(a->file, sizeof a->file, "%s", value);
        a->p = read_file(dir, value);
    } else if (a->kind == 't') {
        uint64_t *table = aligned_alloc(64, 64 * sizeof(uint64_t));
        char *rest = NULL;
        for (char *part = strtok_r(value, ",", &rest); part; part = strtok_r(NULL, ",", &rest)) {
            if (a->nparts == MAX_PARTS) { fprintf(stderr, "too many parts\n"); exit(2); }
            a->parts[a->nparts] = read_file(dir, part);
            table[a->nparts] = (uint64_t)(uintptr_t)a->parts[a->nparts];
            a->nparts++;
        }
        a->p = table;
    } else if (a->kind == 'i') {
        a->i = strtoll(value, NULL, 10);
    } else if (a->kind == 'f' || a->kind == 'd') {
        a->d = strtod(value, NULL);
    } else {
        fprintf(stderr, "bad argument %s\n", token);
        exit(2);
    }
}

#define P(k) (a[k].p)
#define I(k) (a[k].i)
#define F(k) ((float)a[k].d)
#define D(k) (a[k].d)

static int64_t call(const char *name, struct arg *a) {
    if (!strcmp(name, "yolo_scan")) return calls_yolo_scan(P(0), P(1), P(2), F(3));
    if (!strcmp(name, "yolo_decode"))
        return calls_yolo_decode(P(0), P(1), P(2), I(3), F(4), P(5), P(6), P(7));
    if (!strcmp(name, "yolo_nms"))
        return calls_yolo_nms(P(0), P(1), I(2), F(3), D(4), I(5), P(6), P(7), P(8));
    if (!strcmp(name, "pillars_conv_scatter"))
        return calls_pillars_conv_scatter(P(0), P(1), I(2), P(3), P(4), P(5), P(6), P(7), P(8),
                                          P(9));
    if (!strcmp(name, "pillars_scatter")) {
        calls_pillars_scatter(P(0), P(1), I(2), P(3), P(4), P(5), P(6), P(7), P(8), P(9));
        return 0;
    }
    if (!strcmp(name, "pillars_head_cells"))
        return calls_pillars_head_cells(P(0), P(1), P(2), P(3), P(4), P(5), P(6));
    if (!strcmp(name, "pillars_decode")) {
        calls_pillars_decode(P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7), P(8));
        return 0;
    }
    if (!strcmp(name, "pillars_nms"))
        return calls_pillars_nms(P(0), P(1), P(2), I(3), P(4), P(5), P(6), P(7), P(8));
    if (!strcmp(name, "example_ground_removal"))
        return calls_example_ground_removal(P(0), I(1), P(2), P(3));
    fprintf(stderr, "unknown kernel %s\n", name);
    exit(2);
}

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: calls_harness MANIFEST\n"); return 2; }
    FILE *manifest = fopen(argv[1], "r");
    if (manifest == NULL) { perror(argv[1]); return 2; }
    static char line[65536];
    for (int n = 0; fgets(line, sizeof line, manifest); n++) {
        char *save = NULL, *name = strtok_r(line, " \n", &save);
        char *dir = strtok_r(NULL, " \n", &save);
        if (name == NULL || dir == NULL) { fprintf(stderr, "line %d: bad\n", n); return 2; }
        struct arg a[MAX_ARGS];
        int count = 0;
        for (char *t = strtok_r(NULL, " \n", &save); t; t = strtok_r(NULL, " \n", &save)) {
            if (count == MAX_ARGS) { fprintf(stderr, "line %d: too many args\n", n); return 2; }
            parse(dir, t, &a[count++]);
        }
        int64_t ret = call(name, a);
        printf("%d %lld\n", n, (long long)ret);
        for (int k = 0; k < count; k++) {
            if (a[k].kind == 'w') write_back(dir, &a[k]);
            if (a[k].kind == 'r' || a[k].kind == 'w' || a[k].kind == 't') free(a[k].p);
            for (int j = 0; j < a[k].nparts; j++) free(a[k].parts[j]);
        }
    }
    fclose(manifest);
    return 0;
}
