/* Test stand-in for the native backbone of a `--prefix pipe` whole-pipeline library
 * (tests/test_library_pipeline.py): pipe_backbone replays the maps ONNX Runtime computed for
 * frame i (files the test wrote into $REPLAY_DIR: cls_<i>.f32 and feat<k>_<i>.f32) and writes
 * the map it was given to input_<i>.f32 ($REPLAY_INPUT floats), so that every native stage
 * before and after the network is compared with the Python pipeline. Test code only: the
 * library itself refuses to build without a real backbone. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int frame;

static int load(const char *name, float *into) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s_%d.f32", getenv("REPLAY_DIR"), name, frame);
    FILE *f = fopen(path, "rb");
    if (f == NULL) { perror(path); return -100; }
    fseek(f, 0, SEEK_END);
    long bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    size_t got = fread(into, 1, (size_t)bytes, f);
    fclose(f);
    return got == (size_t)bytes ? 0 : -101;
}

size_t pipe_backbone_workspace(void) { return 64; }

int pipe_backbone(void *workspace, const float *input, float *cls, float *const *feats) {
    (void)workspace;
    char path[4096];
    snprintf(path, sizeof path, "%s/input_%d.f32", getenv("REPLAY_DIR"), frame);
    FILE *f = fopen(path, "wb");
    if (f == NULL) { perror(path); return -100; }
    size_t floats = (size_t)atol(getenv("REPLAY_INPUT"));
    fwrite(input, sizeof(float), floats, f);
    fclose(f);
    int rc = load("cls", cls);
    char name[32];
    for (int k = 0; rc == 0 && k < atoi(getenv("REPLAY_PARTS")); k++) {
        snprintf(name, sizeof name, "feat%d", k);
        rc = load(name, feats[k]);
    }
    frame++;
    return rc;
}
