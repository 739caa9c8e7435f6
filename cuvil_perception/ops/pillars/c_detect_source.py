"""The C text of the whole-pipeline API of ``pillars.detect`` (rendered by `c_detect`).

``HEADER`` goes into ``<prefix>.h``, ``SOURCE`` into ``<prefix>_api.c``. ``@P@`` is the prefix,
``@M@`` its macro form, ``@K_<KERNEL>@`` a kernel's internal symbol; the other ``@NAME@`` are
static sizes and weight offsets. Frame flow (the sparse path, as `model.PointPillars.detect`):

    pillarize -> PFN -> conv_scatter (scatter fused into the first Conv+BN+ReLU)
    -> <prefix>_backbone (the network up to the heads' input: class map + feature parts)
    -> head_cells (box / direction 1x1 heads at candidate cells) -> decode
    -> sort by score (stable) -> rotated NMS -> finite rows -> boxes_out
"""

HEADER = r"""/* ---- The whole pipeline: one call per frame ------------------------------------------
 * @P@_handle *h; @P@_open(NULL, &h); then per scan
 *   int n = @P@_detect(h, points, count, boxes, @M@_MAX_BOXES);  (n < 0: an error)
 * and @P@_close(h). points: float32 [count, 4] (x, y, z in m, LiDAR frame: x forward,
 * y left, z up; reflectance 0..1), the KITTI .bin layout. Boxes by descending score. The
 * handle owns every buffer (@HANDLE_MB@ MB, allocated and initialised by open; detect
 * allocates nothing). */
#define @M@_MAX_BOXES @POST@          /* most boxes a frame gives (nms_post) */
#define @M@_MAX_PILLARS @MAX_PILLARS@ /* pillar budget; more are dropped and counted */
#define @M@_NUM_CLASSES @CLASSES@      /* labels 0 .. NUM_CLASSES - 1: @CLASS_NAMES@ */
#define @M@_STATS_LEN 8              /* see @P@_stats */
#define @M@_HANDLE_BYTES @HANDLE_BYTES@ /* what open allocates */

/* One detected box: centre x, y, z; size l (along x at yaw 0), w, h (m); yaw (rad, about z);
 * score (sigmoid, 0..1); label (0-based class index). */
typedef struct {
    float x, y, z, l, w, h, yaw, score;
    int32_t label;
} @P@_box;

/* Options of open; the static shapes (pillar budget, grid, thresholds) are baked into the
 * library. Fill with @P@_config_init (it sets struct_size, which open checks). */
typedef struct {
    uint32_t struct_size; /* sizeof(@P@_config) */
    uint32_t reserved;    /* 0 */
} @P@_config;

typedef struct @P@_handle @P@_handle;

/* Defaults into *config; returns 0 or @M@_ENULL. */
int @P@_config_init(@P@_config *config);
/* A new handle in *handle (config NULL: the defaults); returns 0, @M@_ENULL, @M@_ECONFIG or
 * @M@_ENOMEM (then *handle is NULL). */
int @P@_open(const @P@_config *config, @P@_handle **handle);
/* Detect boxes in one scan of n points: writes at most cap boxes to boxes_out, returns how
 * many (0 .. @M@_MAX_BOXES), @M@_ECAPACITY when the frame had more than cap (the best cap
 * were written), or @M@_ENULL / @M@_ERANGE (n < 0, cap < 0). Points outside the range and
 * non-finite points are skipped and counted (@P@_stats). */
int @P@_detect(@P@_handle *handle, const float *points, int n, @P@_box *boxes_out, int cap);
/* The last frame's counters into stats[0 .. n-1] (n <= @M@_STATS_LEN): pillars,
 * dropped_points, dropped_pillars, invalid_points, out_of_range, candidates,
 * candidate_overflow, nonfinite_boxes. Returns how many were written or an error. */
int @P@_stats(const @P@_handle *handle, int64_t *stats, int n);
/* Frees the handle and everything it owns; NULL is allowed. Returns 0. */
int @P@_close(@P@_handle *handle);"""

SOURCE = r"""/* ---- pillars.detect: the whole pipeline (ops/pillars/c_detect_source.py) ---------------- */
#include <math.h>

/* The weights blob: float32 tensors at 64-byte aligned offsets (in floats, below). */
extern const unsigned char @P@_weights[];
#define W(offset) ((const float *)(const void *)@P@_weights + (offset))

/* The integration point of the native backbone (ops/pillars/c_backbone.py, c_net.py), defined
 * by its objects: input = conv_scatter's map f32 [@HO@, @WO@, @COUT@] (NHWC); changed = the
 * changed_count cells of it this frame's pillars reached (every other cell holds the empty
 * frame's value); writes the class logits cls f32 [@CELLS@, @GROUPS@] (NHWC: cell-major) and
 * the heads' input map F in its channel parts: feats[k] @FEAT_LAYOUT@, parts = {@PARTS@}.
 * cls and feats are the backbone's own between frames (its layers recompute only the cells
 * that changed). workspace: the bytes @P@_backbone_workspace() asked for (64-byte aligned,
 * zeroed, then @P@_backbone_init, once at open). Returns 0 or a negative error code. */
size_t @P@_backbone_workspace(void);
void @P@_backbone_init(void *workspace);
int @P@_backbone(void *workspace, const float *input, const int32_t *changed,
                 int64_t changed_count, float *cls, float *const *feats);

struct @P@_handle {
    float *voxels; int32_t *coords, *num_points; int64_t counts[5]; @GRID_T@ *grid;
    int32_t *overflow, *cells;                                         /* pillarize */
    float *features;                                                   /* PFN */
    float *bev; uint8_t *mark; int32_t *touched, *prev; int64_t prev_count[1], reached; /* conv */
    void *workspace; float *cls; float *feats[@NPARTS@]; uint64_t feat_table[@NPARTS@];
    float *box, *dir; int32_t *found;                                  /* heads */
    float *cand_boxes, *cand_scores; int32_t *cand_labels, *cand_anchor;
    int64_t cand_counts[2];                                            /* decode */
    struct rank { float score; int32_t index; } *ranks;
    float *ranked; double *cosines, *sines, *table, *extents; int32_t *keep;
    uint8_t *suppressed, *near;                                        /* NMS */
    int64_t nonfinite;
    void *blocks[40]; int nblocks;
};

static void *block(struct @P@_handle *h, size_t bytes) {
    size_t rounded = (bytes + 63) / 64 * 64 + 64; /* never 0; kernels may read a vector past */
    void *p = h->nblocks < 40 ? aligned_alloc(64, rounded) : NULL;
    if (p != NULL) { memset(p, 0, rounded); h->blocks[h->nblocks++] = p; }
    return p;
}

API int @P@_config_init(@P@_config *config) {
    if (config == NULL) return @M@_ENULL;
    memset(config, 0, sizeof *config);
    config->struct_size = (uint32_t)sizeof *config;
    return @M@_OK;
}

API int @P@_close(@P@_handle *h) {
    if (h == NULL) return @M@_OK;
    for (int i = 0; i < h->nblocks; i++) free(h->blocks[i]);
    free(h);
    return @M@_OK;
}

static int allocate(struct @P@_handle *h) {
    size_t m = @MAX_PILLARS@, cells = @NUM_CELLS@, out = (size_t)@HO@ * @WO@;
    int ok = (h->voxels = block(h, (m * @MAX_POINTS@ + 4) * 4 * sizeof(float))) &&
        (h->coords = block(h, m * 3 * sizeof(int32_t))) &&
        (h->num_points = block(h, m * sizeof(int32_t))) &&
        (h->grid = block(h, cells * sizeof(@GRID_T@))) &&
        (h->overflow = block(h, cells * sizeof(int32_t))) &&
        (h->cells = block(h, m * sizeof(int32_t))) &&
        (h->features = block(h, m * @CHANNELS@ * sizeof(float))) &&
        (h->bev = block(h, out * @COUT@ * sizeof(float))) && (h->mark = block(h, out)) &&
        (h->touched = block(h, out * sizeof(int32_t))) &&
        (h->prev = block(h, out * sizeof(int32_t))) &&
        (h->workspace = block(h, @P@_backbone_workspace())) &&
        (h->cls = block(h, (size_t)@CELLS@ * @GROUPS@ * sizeof(float))) &&
        (h->box = block(h, (size_t)@CELLS@ * @JB@ * sizeof(float))) &&
        (h->dir = block(h, (size_t)@CELLS@ * @JD@ * sizeof(float))) &&
        (h->found = block(h, (size_t)@CELLS@ * sizeof(int32_t))) &&
        (h->cand_boxes = block(h, (size_t)@CAP@ * 7 * sizeof(float))) &&
        (h->cand_scores = block(h, (size_t)@CAP@ * sizeof(float))) &&
        (h->cand_labels = block(h, (size_t)@CAP@ * sizeof(int32_t))) &&
        (h->cand_anchor = block(h, (size_t)@CAP@ * sizeof(int32_t))) &&
        (h->ranks = block(h, (size_t)@CAP@ * sizeof(struct rank))) &&
        (h->ranked = block(h, (size_t)@PRE@ * 7 * sizeof(float))) &&
        (h->cosines = block(h, (size_t)@PRE@ * sizeof(double))) &&
        (h->sines = block(h, (size_t)@PRE@ * sizeof(double))) &&
        (h->table = block(h, (size_t)@PRE@ * @TABLE_WIDTH@ * sizeof(double))) &&
        (h->extents = block(h, (size_t)@PRE@ * 4 * sizeof(double))) &&
        (h->keep = block(h, (size_t)@POST@ * sizeof(int32_t))) &&
        (h->suppressed = block(h, (size_t)@PRE@)) && (h->near = block(h, (size_t)@PRE@));
    static const int parts[@NPARTS@] = {@PARTS@};
    for (int k = 0; ok && k < @NPARTS@; k++) {
        ok = (h->feats[k] = block(h, (size_t)parts[k] * @CELLS@ * sizeof(float))) != NULL;
        if (ok) h->feat_table[k] = (uint64_t)(uintptr_t)h->feats[k];
    }
    return ok;
}

API int @P@_open(const @P@_config *config, @P@_handle **handle) {
    if (handle == NULL) return @M@_ENULL;
    *handle = NULL;
    if (config != NULL && (config->struct_size != sizeof *config || config->reserved != 0))
        return @M@_ECONFIG;
    struct @P@_handle *h = calloc(1, sizeof *h);
    if (h == NULL) return @M@_ENOMEM;
    if (!allocate(h)) { @P@_close(h); return @M@_ENOMEM; }
    memset(h->grid, 0xff, (size_t)@NUM_CELLS@ * sizeof(@GRID_T@)); /* -1: no pillar */
    const float *bias = W(@W_CONV_BIAS@); /* a cell no pillar reaches: relu(bias) */
    for (size_t c = 0; c < (size_t)@HO@ * @WO@; c++)
        for (int o = 0; o < @COUT@; o++) h->bev[c * @COUT@ + o] = bias[o] > 0.0f ? bias[o] : 0.0f;
    @P@_backbone_init(h->workspace);
    *handle = h;
    return @M@_OK;
}

/* The network between the fused first layer and the heads (the integration point). */
static int run_backbone(struct @P@_handle *h) {
    return @P@_backbone(h->workspace, h->bev, h->touched, h->reached, h->cls, h->feats);
}

static int by_score(const void *a, const void *b) {
    const struct rank *x = a, *y = b; /* descending score, then ascending index: stable */
    if (x->score != y->score) return x->score > y->score ? -1 : 1;
    return (x->index > y->index) - (x->index < y->index);
}

/* Sort the candidates, NMS, the kept finite rows into boxes_out; returns the count. */
static int select_boxes(struct @P@_handle *h, @P@_box *boxes_out, int cap) {
    int64_t count = h->cand_counts[0];
    for (int64_t i = 0; i < count; i++) {
        h->ranks[i].score = h->cand_scores[i];
        h->ranks[i].index = (int32_t)i;
    }
    qsort(h->ranks, (size_t)count, sizeof *h->ranks, by_score);
    int64_t m = count < @PRE@ ? count : @PRE@;
    for (int64_t i = 0; i < m; i++) {
        memcpy(h->ranked + i * 7, h->cand_boxes + (size_t)h->ranks[i].index * 7, 7 * sizeof(float));
        double heading = (double)h->ranked[i * 7 + 6];
        h->cosines[i] = cos(heading);
        h->sines[i] = sin(heading);
    }
    int64_t kept = @K_NMS@(h->ranked, h->cosines, h->sines, m, h->keep, h->suppressed,
                           h->table, h->extents, h->near);
    int written = 0;
    h->nonfinite = 0;
    for (int64_t k = 0; k < kept; k++) {
        int32_t i = h->ranks[h->keep[k]].index;
        const float *b = h->cand_boxes + (size_t)i * 7;
        float score = h->cand_scores[i];
        int finite = isfinite(score);
        for (int j = 0; j < 7; j++) finite = finite && isfinite(b[j]);
        if (!finite) { h->nonfinite++; continue; }
        if (written < cap) {
            @P@_box *o = &boxes_out[written];
            o->x = b[0]; o->y = b[1]; o->z = b[2]; o->l = b[3]; o->w = b[4]; o->h = b[5];
            o->yaw = b[6]; o->score = score; o->label = h->cand_labels[i];
        }
        written++;
    }
    return written;
}

API int @P@_detect(@P@_handle *h, const float *points, int n, @P@_box *boxes_out, int cap) {
    if (h == NULL || (points == NULL && n > 0) || (boxes_out == NULL && cap > 0))
        return @M@_ENULL;
    if (n < 0 || cap < 0) return @M@_ERANGE;
    static const float none[4];
    @K_PILLARIZE@(n > 0 ? points : none, (int64_t)n, h->voxels, h->coords, h->num_points,
                  h->counts, h->grid, h->overflow, h->cells);
    int64_t pillars = h->counts[0];
    @K_PFN@(h->voxels, h->coords, h->num_points, pillars, W(@W_PFN_WEIGHTS@), W(@W_PFN_BIAS@),
            h->features);
    h->reached = @K_CONV@(h->features, h->coords, pillars, W(@W_CONV_WEIGHTS@),
                          W(@W_CONV_BIAS@), h->bev, h->mark, h->touched, h->prev,
                          h->prev_count);
    int rc = run_backbone(h);
    if (rc < 0) return rc;
    @K_HEADS@(h->cls, h->feat_table, W(@W_HEAD_WEIGHTS@), W(@W_HEAD_BIAS@), h->box, h->dir,
              h->found);
    @K_DECODE@(h->cls, h->box, h->dir, W(@W_ANCHORS@), h->cand_boxes, h->cand_scores,
               h->cand_labels, h->cand_anchor, h->cand_counts);
    int found = select_boxes(h, boxes_out, cap);
    return found > cap ? @M@_ECAPACITY : found;
}

API int @P@_stats(const @P@_handle *h, int64_t *stats, int n) {
    if (h == NULL || (stats == NULL && n > 0)) return @M@_ENULL;
    if (n < 0 || n > @M@_STATS_LEN) return @M@_ERANGE;
    const int64_t all[@M@_STATS_LEN] = {h->counts[0], h->counts[1], h->counts[2], h->counts[3],
                                        h->counts[4], h->cand_counts[0], h->cand_counts[1],
                                        h->nonfinite};
    memcpy(stats, all, (size_t)n * sizeof *stats);
    return n;
}"""
