/* Test harness for a `compile --library --prefix harness` build of the PointPillars kernels
 * (tests/test_library_aarch64.py runs it under qemu-user and compares with the host's kernels).
 *
 * usage: harness WEIGHTS ANCHORS DIR SCAN0.bin [SCAN1.bin ...]
 * Runs frame after frame on persistent buffers, as the pipeline does:
 *   pillarize -> DIR/pz_<i>.bin   counts[5] i64, coords[count, 3] i32, num_points[count] i32,
 *                                 voxels[count, K, 4] f32
 *   pfn       -> DIR/pfn_<i>.bin  features[count, C] f32
 *   scatter   -> DIR/sc_<i>.bin   nonzero words of the whole map (i64), then map[c, y, x] at
 *                                 every pillar's cell, c-major [C, count] f32
 *   decode (when DIR/head_<i>.f32 exists: cls [A, classes], box [A, 7], dir [A, 2] f32)
 *             -> DIR/dec_<i>.bin  counts[2] i64, boxes[n, 7] f32, scores[n] f32, labels[n] i32,
 *                                 anchor[n] i32
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define PZ(name) HARNESS_PILLARS_PILLARIZE_##name
#define SL(name) HARNESS_PILLARS_SCATTER_LINES_##name
#define DC(name) HARNESS_PILLARS_DECODE_##name
#define K PZ(MAX_POINTS)
#define P PZ(MAX_PILLARS)
#define C HARNESS_PILLARS_PFN_CHANNELS
#define CELLS (PZ(NX) * PZ(NY))

static void *zalloc(size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64;
    void *p = aligned_alloc(64, rounded);
    if (p == NULL) { perror("aligned_alloc"); exit(1); }
    memset(p, 0, rounded);
    return p;
}

static void *read_all(const char *path, size_t *bytes) {
    FILE *f = fopen(path, "rb");
    if (f == NULL) return NULL;
    fseek(f, 0, SEEK_END);
    *bytes = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    void *data = zalloc(*bytes + 16);
    if (fread(data, 1, *bytes, f) != *bytes) { perror(path); exit(1); }
    fclose(f);
    return data;
}

static FILE *create(const char *dir, const char *stem, int frame) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_%d.bin", dir, stem, frame);
    FILE *f = fopen(path, "wb");
    if (f == NULL) { perror(path); exit(1); }
    return f;
}

static void put(FILE *f, const void *data, size_t bytes) {
    if (bytes && fwrite(data, 1, bytes, f) != bytes) { perror("fwrite"); exit(1); }
}

int main(int argc, char **argv) {
    if (argc < 5) { fprintf(stderr, "usage: harness WEIGHTS ANCHORS DIR SCAN...\n"); return 2; }
    size_t wbytes, abytes;
    float *weights = read_all(argv[1], &wbytes);
    float *anchors = read_all(argv[2], &abytes);
    if (weights == NULL || wbytes != 15 * C * 4 || anchors == NULL
            || abytes != (size_t)DC(ANCHORS) * 7 * 4) {
        fprintf(stderr, "bad weights or anchors file\n");
        return 2;
    }
    float *voxels = zalloc(PZ(VOXELS_BYTES));
    int32_t *coords = zalloc(PZ(COORDS_BYTES)), *num_points = zalloc(PZ(NUM_POINTS_BYTES));
    int64_t *counts = zalloc(PZ(COUNTS_BYTES));
    void *grid = zalloc(PZ(GRID_BYTES));
    memset(grid, 0xff, PZ(GRID_BYTES));
    int32_t *overflow = zalloc(PZ(OVERFLOW_BYTES)), *cells = zalloc(PZ(CELLS_BYTES));
    float *features = zalloc((size_t)P * C * 4);
    float *bev = zalloc(SL(BEV_BYTES));
    void *sl[10] = {zalloc(SL(PREV_CELLS_BYTES)), zalloc(SL(PREV_COUNT_BYTES)),
                    zalloc(SL(BITMAP_BYTES)), zalloc(SL(CELL_PILLAR_BYTES)),
                    zalloc(SL(CELLS_BYTES)), zalloc(SL(PIDS_BYTES)),
                    zalloc(SL(UNION_LINES_BYTES)), zalloc(SL(UNION_ENDS_BYTES)),
                    zalloc(SL(GATHERED_BYTES)), zalloc(SL(RANK_BYTES))};
    float *boxes = zalloc(DC(BOXES_BYTES)), *scores = zalloc(DC(SCORES_BYTES));
    int32_t *labels = zalloc(DC(LABELS_BYTES)), *anchor = zalloc(DC(ANCHOR_BYTES));
    int64_t *dcounts = zalloc(DC(COUNTS_BYTES));

    for (int i = 0; i + 4 < argc; i++) {
        size_t bytes;
        float *points = read_all(argv[4 + i], &bytes);
        if (points == NULL) { perror(argv[4 + i]); return 2; }
        harness_pillars_pillarize(points, (int64_t)(bytes / 16), voxels, coords, num_points,
                                  counts, grid, overflow, cells);
        int64_t n = counts[0];
        FILE *f = create(argv[3], "pz", i);
        put(f, counts, 40);
        put(f, coords, (size_t)n * 12);
        put(f, num_points, (size_t)n * 4);
        put(f, voxels, (size_t)n * K * 16);
        fclose(f);

        harness_pillars_pfn(voxels, coords, num_points, n, weights, weights + 14 * C, features);
        f = create(argv[3], "pfn", i);
        put(f, features, (size_t)n * C * 4);
        fclose(f);

        harness_pillars_scatter_lines(features, coords, n, bev, sl[0], sl[1], sl[2], sl[3],
                                      sl[4], sl[5], sl[6], sl[7], sl[8], sl[9]);
        int64_t nonzero = 0;
        const uint32_t *words = (const uint32_t *)bev;
        for (size_t w = 0; w < (size_t)C * CELLS; w++) nonzero += words[w] != 0;
        f = create(argv[3], "sc", i);
        put(f, &nonzero, 8);
        for (int c = 0; c < C; c++)
            for (int64_t p = 0; p < n; p++)
                put(f, &bev[(size_t)c * CELLS + coords[p * 3 + 1] * PZ(NX) + coords[p * 3 + 2]],
                    4);
        fclose(f);
        free(points);

        char head_path[4096];
        snprintf(head_path, sizeof head_path, "%s/head_%d.f32", argv[3], i);
        float *head = read_all(head_path, &bytes);
        if (head == NULL) continue;
        size_t a = DC(ANCHORS);
        harness_pillars_decode(head, head + a * DC(CLASSES), head + a * (DC(CLASSES) + 7),
                               anchors, boxes, scores, labels, anchor, dcounts);
        int64_t kept = dcounts[0];
        f = create(argv[3], "dec", i);
        put(f, dcounts, 16);
        put(f, boxes, (size_t)kept * 28);
        put(f, scores, (size_t)kept * 4);
        put(f, labels, (size_t)kept * 4);
        put(f, anchor, (size_t)kept * 4);
        fclose(f);
        free(head);
    }
    return 0;
}
