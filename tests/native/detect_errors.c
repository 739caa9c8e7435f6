/* The error paths of a `--prefix pipe` whole-pipeline library (tests/test_library_pipeline.py),
 * linked with its archive; usage: detect_errors SCAN.bin
 * Prints one "name value" line per check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipe.h"

int main(int argc, char **argv) {
    if (argc != 2) return 2;
    FILE *f = fopen(argv[1], "rb");
    if (f == NULL) return 2;
    static float points[4 * 200000];
    int n = (int)(fread(points, 16, 200000, f));
    fclose(f);
    pipe_config config;
    int rc = pipe_config_init(&config); /* each call before the printf: argument order */
    printf("config_init %d %d\n", rc, config.struct_size == sizeof config);
    printf("config_init_null %d\n", pipe_config_init(NULL));
    pipe_handle *h = (pipe_handle *)&config;
    printf("open_null %d\n", pipe_open(NULL, NULL));
    config.struct_size += 4;
    rc = pipe_open(&config, &h);
    printf("open_bad_size %d %d\n", rc, h == NULL);
    config.struct_size -= 4;
    config.reserved = 1;
    printf("open_reserved %d\n", pipe_open(&config, &h));
    config.reserved = 0;
    printf("open %d\n", pipe_open(&config, &h));
    static pipe_box boxes[PIPE_MAX_BOXES], one[1];
    printf("detect_null_handle %d\n", pipe_detect(NULL, points, n, boxes, PIPE_MAX_BOXES));
    printf("detect_null_points %d\n", pipe_detect(h, NULL, n, boxes, PIPE_MAX_BOXES));
    printf("detect_null_boxes %d\n", pipe_detect(h, points, n, NULL, 1));
    printf("detect_negative_n %d\n", pipe_detect(h, points, -1, boxes, PIPE_MAX_BOXES));
    printf("detect_negative_cap %d\n", pipe_detect(h, points, n, boxes, -1));
    int small = pipe_detect(h, points, n, one, 1);           /* the same scan twice */
    int full = pipe_detect(h, points, n, boxes, PIPE_MAX_BOXES);
    printf("capacity %d %d %d\n", small, full,
           full > 1 && memcmp(&one[0], &boxes[0], sizeof one[0]) == 0);
    int64_t stats[PIPE_STATS_LEN + 1];
    rc = pipe_stats(h, stats, PIPE_STATS_LEN);
    printf("stats %d %d\n", rc, (int)stats[0]);
    printf("stats_range %d\n", pipe_stats(h, stats, PIPE_STATS_LEN + 1));
    printf("strerror %s\n", pipe_strerror(PIPE_ECAPACITY));
    rc = pipe_close(h);
    printf("close %d %d\n", rc, pipe_close(NULL));
    return 0;
}
