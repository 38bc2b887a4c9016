// An LD_PRELOAD library for `scripts/bench.sh regions`: how a process's wall time splits between OpenMP
// parallel regions and the serial code between them. It wraps libgomp's GOMP_parallel (every region hnas
// and oneDNN open) and oneDNN's dnnl_primitive_execute, and at exit writes one JSON line to the file
// $HNAS_REGIONS_OUT: the outermost regions the main thread opened and the seconds inside them, from the
// first region's start to the last one's end; the products it executed outside a region; and those of
// them that opened no region at all (oneDNN ran them on the calling thread alone), with their shapes.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern int omp_in_parallel(void);

typedef void (*gomp_parallel_fn)(void (*)(void*), void*, unsigned, unsigned);
typedef dnnl_status_t (*execute_fn)(const_dnnl_primitive_t, dnnl_stream_t, int, const dnnl_exec_arg_t*);

enum { kMaxShapes = 256 };
static struct {
    long regions, products, serial_products;
    double first_start, last_end, inside, product_seconds, serial_product_seconds;
    int shapes;
    char shape[kMaxShapes][128];
    long shape_count[kMaxShapes];
    double shape_seconds[kMaxShapes];
} stats;
static __thread int depth;  // regions this thread opened and has not left

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

void GOMP_parallel(void (*body)(void*), void* data, unsigned threads, unsigned flags) {
    static gomp_parallel_fn real;
    if (!real) real = (gomp_parallel_fn)dlsym(RTLD_NEXT, "GOMP_parallel");
    const int outermost = depth == 0 && !omp_in_parallel();
    const double start = outermost ? now() : 0.0;
    ++depth;
    real(body, data, threads, flags);
    --depth;
    if (!outermost) return;
    const double end = now();
    if (stats.regions++ == 0) stats.first_start = start;
    stats.inside += end - start;
    stats.last_end = end;
}

// "[dims]x[dims]->[dims]" of a matmul's source, weights and destination.
static void describe(const_dnnl_primitive_t primitive, char* out, size_t size) {
    const_dnnl_primitive_desc_t pd;
    size_t used = 0;
    out[0] = '\0';
    if (dnnl_primitive_get_primitive_desc(primitive, &pd) != dnnl_success) return;
    const dnnl_query_t queries[3] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md};
    for (int q = 0; q < 3 && used < size; ++q) {
        const dnnl_memory_desc_t* md = dnnl_primitive_desc_query_md(pd, queries[q], 0);
        used += (size_t)snprintf(out + used, size - used, q == 0 ? "[" : q == 1 ? "x[" : "->[");
        for (int d = 0; md && d < md->ndims && used < size; ++d)
            used += (size_t)snprintf(out + used, size - used, d ? ",%ld" : "%ld", (long)md->dims[d]);
        if (used < size) used += (size_t)snprintf(out + used, size - used, "]");
    }
}

dnnl_status_t dnnl_primitive_execute(const_dnnl_primitive_t primitive, dnnl_stream_t stream, int nargs,
                                     const dnnl_exec_arg_t* args) {
    static execute_fn real;
    if (!real) real = (execute_fn)dlsym(RTLD_NEXT, "dnnl_primitive_execute");
    if (depth > 0 || omp_in_parallel()) return real(primitive, stream, nargs, args);
    const long regions_before = stats.regions;
    const double start = now();
    const dnnl_status_t status = real(primitive, stream, nargs, args);
    const double seconds = now() - start;
    ++stats.products;
    stats.product_seconds += seconds;
    if (stats.regions != regions_before) return status;
    ++stats.serial_products;
    stats.serial_product_seconds += seconds;
    char shape[128];
    describe(primitive, shape, sizeof shape);
    int i = 0;
    while (i < stats.shapes && strcmp(stats.shape[i], shape) != 0) ++i;
    if (i == stats.shapes && stats.shapes < kMaxShapes) strcpy(stats.shape[stats.shapes++], shape);
    if (i < kMaxShapes) {
        ++stats.shape_count[i];
        stats.shape_seconds[i] += seconds;
    }
    return status;
}

__attribute__((destructor)) static void report(void) {
    const char* path = getenv("HNAS_REGIONS_OUT");
    FILE* out = path ? fopen(path, "w") : NULL;
    if (!out) return;
    fprintf(out,
            "{\"regions\":%ld,\"wall_seconds\":%.6f,\"inside_seconds\":%.6f,\"products\":%ld,\"product_seconds\":%.6f,"
            "\"serial_products\":%ld,\"serial_product_seconds\":%.6f,\"serial_shapes\":{",
            stats.regions, stats.last_end - stats.first_start, stats.inside, stats.products, stats.product_seconds,
            stats.serial_products, stats.serial_product_seconds);
    for (int i = 0; i < stats.shapes; ++i)
        fprintf(out, "%s\"%s\":[%ld,%.6f]", i ? "," : "", stats.shape[i], stats.shape_count[i], stats.shape_seconds[i]);
    fprintf(out, "}}\n");
    fclose(out);
}
