// shim.cu: a small C ABI around FlashAttention-3 (flash-attention's hopper/), for the
// measurement tool in this directory (fa3_bench.py loads it with ctypes). Not project code.
//
// Scope: bf16, sm90 (arch 90 only), non-varlen, non-paged, one split, no softcap, no local
// window, no append-KV, no rotary, no dropout; causal or not. Head dim 128, and 64 when
// built with -DFA3_WITH_HDIM64 (and the hdim64 instantiation objects are linked).
//
// Tensors are contiguous, torch layout (batch, seqlen, heads, head_dim), as FA3's
// flash_attn_func takes them. softmax_lse is float (batch, heads, seqlen_q).
// The params are filled the way hopper/flash_api.cpp (mha_fwd, mha_bwd, set_params_fprop,
// set_params_dgrad) fills them for that case; that file's text is not copied here.
//
// Every entry point returns 0 on success and nonzero (with a line on stderr) otherwise.
// Note: FA3's own launch code calls exit(1) on a CUDA or CUTLASS error (cuda_check.h).

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>
#include <cutlass/numeric_types.h>

#include "flash.h"

namespace {

constexpr int kMaxDevices = 64;

int round_multiple(int x, int m) { return (x + m - 1) / m * m; }

int fail(char const* fn, char const* msg) {
    fprintf(stderr, "fa3 %s: %s\n", fn, msg);
    return 1;
}

bool hdim_compiled(int d) {
    if (d == 128) { return true; }
#ifdef FA3_WITH_HDIM64
    if (d == 64) { return true; }
#endif
    return false;
}

// Same value as flash_api.cpp's round_up_headdim for the head dims we compile (64, 128).
int round_up_headdim(int d) { return d <= 64 ? 64 : (d <= 96 ? 96 : (d <= 128 ? 128 : (d <= 192 ? 192 : 256))); }

// Checks shared by forward and backward (and the size queries).
int check_dims(char const* fn, int batch, int seqlen_q, int seqlen_k, int heads, int heads_k, int head_dim) {
    if (batch < 1 || seqlen_q < 1 || seqlen_k < 1 || heads < 1 || heads_k < 1) {
        return fail(fn, "batch, seqlen_q, seqlen_k, heads and heads_k must all be >= 1");
    }
    if (heads % heads_k != 0) { return fail(fn, "heads must be a multiple of heads_k"); }
    if (!hdim_compiled(head_dim)) {
#ifdef FA3_WITH_HDIM64
        return fail(fn, "head_dim must be 128 or 64");
#else
        return fail(fn, "head_dim must be 128 (this build has no hdim64 kernels)");
#endif
    }
    // Offsets inside FA3 are int64, but seqlen * heads * head_dim products of the lse /
    // accumulators are formed in int; keep well inside int range.
    if ((long long)batch * heads * (long long)(seqlen_q + 256) * head_dim > 0x7fffffffLL ||
        (long long)batch * heads_k * (long long)(seqlen_k + 256) * head_dim > 0x7fffffffLL) {
        return fail(fn, "problem too large for this shim (element count over 2^31)");
    }
    return 0;
}

struct DeviceInfo { int arch; int num_sm; };

int device_info(char const* fn, DeviceInfo* out) {
    static DeviceInfo cache[kMaxDevices];
    static bool cached[kMaxDevices] = {};
    int dev = 0;
    cudaError_t e = cudaGetDevice(&dev);
    if (e != cudaSuccess) { return fail(fn, cudaGetErrorString(e)); }
    if (dev >= 0 && dev < kMaxDevices && cached[dev]) { *out = cache[dev]; return 0; }
    int major = 0, minor = 0, sms = 0;
    if ((e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev)) != cudaSuccess) {
        return fail(fn, cudaGetErrorString(e));
    }
    DeviceInfo info{major * 10 + minor, sms};  // flash_api: sm_margin = 0
    if (dev >= 0 && dev < kMaxDevices) { cache[dev] = info; cached[dev] = true; }
    *out = info;
    return 0;
}

// The part of set_params_fprop that our case reads, for q/k/v/o contiguous (b, s, h, d).
// The window and causal logic follows mha_fwd / mha_bwd + set_params_fprop with
// window_size = (-1, -1), attention_chunk = 0, softcap = 0, p_dropout = 0.
void set_common(Flash_fwd_params& p, DeviceInfo const& dev,
                void* q, void* k, void* v, void* o, float* lse,
                int b, int seqlen_q, int seqlen_k, int seqlen_q_rounded, int seqlen_k_rounded,
                int h, int h_k, int d, int d_rounded, float softmax_scale, bool causal) {
    p = {};
    p.is_bf16 = true;
    p.is_e4m3 = false;

    using index_t = Flash_fwd_params::index_t;
    index_t const row_q = index_t(h) * d;    // stride(-3) of (b, s, h, d)
    index_t const row_k = index_t(h_k) * d;
    p.q_ptr = q;
    p.k_ptr = k;
    p.v_ptr = v;
    p.q_row_stride = row_q;
    p.k_row_stride = row_k;
    p.v_row_stride = row_k;
    p.q_head_stride = d;
    p.k_head_stride = d;
    p.v_head_stride = d;
    p.v_dim_stride = 1;
    p.o_ptr = o;
    p.o_row_stride = row_q;
    p.o_head_stride = d;
    p.q_batch_stride = index_t(seqlen_q) * row_q;
    p.o_batch_stride = index_t(seqlen_q) * row_q;
    p.k_batch_stride = index_t(seqlen_k) * row_k;
    p.v_batch_stride = index_t(seqlen_k) * row_k;

    p.cu_seqlens_q = nullptr;
    p.cu_seqlens_k = nullptr;
    p.seqused_q = nullptr;
    p.seqused_k = nullptr;

    p.softmax_lse_ptr = lse;

    p.b = b;
    p.h = h;
    p.h_k = h_k;
    p.seqlen_q = seqlen_q;
    p.seqlen_k = seqlen_k;
    p.seqlen_q_rounded = seqlen_q_rounded;
    p.seqlen_k_rounded = seqlen_k_rounded;
    p.d = d;
    p.d_rounded = d_rounded;

    p.scale_softmax = softmax_scale;
    p.softcap = 0.f;

    // p_dropout = 0: FA3 stores the keep probability.
    p.p_dropout = 1.f;
    p.p_dropout_in_uint8_t = uint8_t(255);
    p.rp_dropout = 1.f;

    // Causal is window (-1, 0); not causal is (-1, -1). Then negative sizes are replaced by
    // the full extent, as set_params_fprop does.
    int window_size_left = -1;
    int window_size_right = causal ? 0 : -1;
    p.is_causal = window_size_left < 0 && window_size_right == 0;
    p.is_local = (window_size_left >= 0 || window_size_right >= 0) && !p.is_causal;
    if (window_size_left < 0) { window_size_left = seqlen_k - 1; }
    if (window_size_right < 0) { window_size_right = seqlen_q - 1; }
    p.window_size_left = window_size_left;
    p.window_size_right = window_size_right;
    p.attention_chunk = 0;

    p.arch = dev.arch;
    p.num_sm = dev.num_sm;

    // Set by mha_fwd / mha_bwd right after set_params_*.
    p.total_q = b * seqlen_q;
    p.total_k = b * seqlen_k;
    p.dv = d;
    p.dv_rounded = d_rounded;
}

// mha_fwd: causal with seqlen_q == 1 (and no paged KV) is run as not causal.
bool fwd_is_causal(int seqlen_q, int causal) { return causal != 0 && seqlen_q != 1; }

// mha_fwd's scheduler metadata for our case (arch 90, one split, not varlen): only the
// causal (dynamic persistent, LPT) scheduler needs the tile counter. The buffer holds
// round_up(b, 4) * num_prepare_batch_vectors ints (unused when not varlen) and then the
// counter; mha_fwd zeroes it all for every call.
struct FwdScheduler { bool needs_semaphore; int offset; int metadata_ints; };

FwdScheduler fwd_scheduler(int batch, bool is_causal) {
    bool const is_local = false;
    bool const needs_semaphore = is_causal || is_local;  // && num_splits == 1, !varlen
    bool const varlen_sort_batches = !is_local;
    bool const head_swizzle = is_causal || is_local;
    FwdScheduler s{needs_semaphore, 0, 0};
    if (needs_semaphore) {
        int const b_rounded = round_multiple(batch, 4);
        int const num_prepare_batch_vectors = (varlen_sort_batches ? 1 : 0) + (head_swizzle ? 1 : 0);
        s.offset = b_rounded * num_prepare_batch_vectors;
        s.metadata_ints = 1 + s.offset;
    }
    return s;
}

// mha_bwd's tile sizes for sm90 (must match run_mha_bwd_hdim* in flash_bwd_launch_template.h).
struct BwdTiles { int kBlockM; int kBlockN; };

BwdTiles bwd_tiles(int head_size_rounded, bool is_causal) {
    bool const is_local = false;
    bool const has_softcap = false;
    int const kBlockM = head_size_rounded <= 64 ? (is_causal && has_softcap ? 96 : 128)
        : (head_size_rounded <= 96 ? 64
           : (head_size_rounded <= 128 ? (is_causal || is_local || has_softcap ? 64 : 80) : 64));
    int const kBlockN = head_size_rounded <= 128 ? 128 : (head_size_rounded <= 192 ? 96 : 80);
    return {kBlockM, kBlockN};
}

struct BwdSizes {
    int seqlen_q_rounded, seqlen_k_rounded, d_rounded, kBlockM, kBlockN;
    size_t dq_accum_bytes, dsoftmax_sum_bytes, softmax_lse_log2_bytes, dq_semaphore_bytes;
};

BwdSizes bwd_sizes(int batch, int seqlen_q, int seqlen_k, int heads, int head_dim, int causal) {
    BwdSizes s{};
    s.d_rounded = round_up_headdim(head_dim);
    BwdTiles const t = bwd_tiles(s.d_rounded, causal != 0);
    s.kBlockM = t.kBlockM;
    s.kBlockN = t.kBlockN;
    s.seqlen_q_rounded = round_multiple(seqlen_q, t.kBlockM);
    s.seqlen_k_rounded = round_multiple(seqlen_k, t.kBlockN);
    size_t const bh = size_t(batch) * size_t(heads);
    s.dq_accum_bytes = bh * size_t(s.seqlen_q_rounded) * size_t(s.d_rounded) * sizeof(float);
    s.dsoftmax_sum_bytes = bh * size_t(s.seqlen_q_rounded) * sizeof(float);
    s.softmax_lse_log2_bytes = bh * size_t(s.seqlen_q_rounded) * sizeof(float);
    s.dq_semaphore_bytes = size_t((seqlen_q + t.kBlockM - 1) / t.kBlockM) * bh * sizeof(int);
    return s;
}

int check_launch(char const* fn) {
    cudaError_t const e = cudaGetLastError();
    if (e != cudaSuccess) { return fail(fn, cudaGetErrorString(e)); }
    return 0;
}

}  // namespace

// flash_prepare_scheduler.cu defines this (the varlen scheduler prep, referenced from
// run_flash_fwd but never run for non-varlen). This weak stand-in only lets the library
// link if that TU was not built.
__attribute__((weak)) void prepare_varlen_num_blocks(Flash_fwd_params& params, cudaStream_t stream, bool packgqa,
                                                     int blockM, int blockN, bool enable_pdl) {
    (void)params; (void)stream; (void)packgqa; (void)blockM; (void)blockN; (void)enable_pdl;
    fprintf(stderr, "fa3: prepare_varlen_num_blocks called but flash_prepare_scheduler.cu was not linked\n");
    abort();
}

extern "C" {

// 1 if kernels for this head dim are compiled into the library.
int fa3_has_head_dim(int head_dim) { return hdim_compiled(head_dim) ? 1 : 0; }

// Bytes of scratch fa3_fwd needs (0: none, scratch may be NULL). Depends on batch and causal.
size_t fa3_fwd_workspace_size(int batch, int seqlen_q, int seqlen_k, int heads, int heads_k, int head_dim,
                              int causal) {
    (void)seqlen_k; (void)heads; (void)heads_k; (void)head_dim;
    FwdScheduler const s = fwd_scheduler(batch, fwd_is_causal(seqlen_q, causal));
    return size_t(s.metadata_ints) * sizeof(int);
}

int fa3_fwd(void* q, void* k, void* v, void* o, float* lse,
            int batch, int seqlen_q, int seqlen_k, int heads, int heads_k, int head_dim,
            float softmax_scale, int causal, void* scratch, cudaStream_t stream) {
    char const* fn = "fa3_fwd";
    if (int r = check_dims(fn, batch, seqlen_q, seqlen_k, heads, heads_k, head_dim)) { return r; }
    if (!q || !k || !v || !o || !lse) { return fail(fn, "q, k, v, o and lse must be non-null"); }
    DeviceInfo dev;
    if (int r = device_info(fn, &dev)) { return r; }
    if (dev.arch != 90) { return fail(fn, "this build only has sm90 (compute capability 9.0) kernels"); }

    bool const is_causal = fwd_is_causal(seqlen_q, causal);
    int const d_rounded = round_up_headdim(head_dim);
    int const seqlen_q_rounded = round_multiple(seqlen_q, 128);
    int const seqlen_k_rounded = round_multiple(seqlen_k, 128);

    Flash_fwd_params p{};
    set_common(p, dev, q, k, v, o, lse, batch, seqlen_q, seqlen_k, seqlen_q_rounded, seqlen_k_rounded,
               heads, heads_k, head_dim, d_rounded, softmax_scale, is_causal);
    p.b_k = batch;
    p.page_size = 1;      // mha_fwd: 1 when not paged
    p.num_pages = 0;
    p.rotary_dim = 0;
    p.pagedkv_tma = false;
    p.prepare_varlen_pdl = false;
    p.num_splits = 1;     // flash_attn_func default num_splits=1
    // get_pack_gqa gives false for h == h_k; only PackGQA=false kernels are compiled here, so
    // GQA inputs also run unpacked (correct, but FA3's heuristic might have packed).
    p.pack_gqa = false;
    p.varlen_sort_batches = !p.is_local;
    p.head_swizzle = p.is_causal || p.is_local;
    p.skip_scheduler_metadata_computation = false;

    FwdScheduler const s = fwd_scheduler(batch, p.is_causal);
    if (s.needs_semaphore) {
        if (!scratch) { return fail(fn, "scratch is NULL but fa3_fwd_workspace_size() is nonzero"); }
        cudaError_t const e = cudaMemsetAsync(scratch, 0, size_t(s.metadata_ints) * sizeof(int), stream);
        if (e != cudaSuccess) { return fail(fn, cudaGetErrorString(e)); }
        p.tile_count_semaphore = static_cast<int*>(scratch) + s.offset;
        p.tile_count_semaphore_offset = s.offset;
    } else {
        p.tile_count_semaphore = nullptr;
    }
    p.num_splits_dynamic_ptr = nullptr;
    p.num_m_blocks_ptr = nullptr;
    p.varlen_batch_idx_ptr = nullptr;
    p.num_nheads_in_l2_ptr = nullptr;

    if (head_dim == 128) {
        run_mha_fwd_<90, cutlass::bfloat16_t, 128, 128, false, false, false, false>(p, stream);
    }
#ifdef FA3_WITH_HDIM64
    else if (head_dim == 64) {
        run_mha_fwd_<90, cutlass::bfloat16_t, 64, 64, false, false, false, false>(p, stream);
    }
#endif
    else {
        return fail(fn, "unsupported head_dim");
    }
    return check_launch(fn);
}

// Writes the byte sizes of the four backward scratch buffers the caller must allocate:
// sizes[0] dq_accum (float), sizes[1] dsoftmax_sum (float), sizes[2] softmax_lse_log2 (float),
// sizes[3] dq_semaphore (int32). None needs zeroing (FA3's preprocess kernel clears dq_accum
// and the semaphore, as in mha_bwd). Returns nonzero for unsupported inputs.
int fa3_bwd_workspace_sizes(int batch, int seqlen_q, int seqlen_k, int heads, int heads_k, int head_dim,
                            int causal, size_t* sizes) {
    char const* fn = "fa3_bwd_workspace_sizes";
    if (!sizes) { return fail(fn, "sizes must be non-null"); }
    if (int r = check_dims(fn, batch, seqlen_q, seqlen_k, heads, heads_k, head_dim)) { return r; }
    if (heads != heads_k) { return fail(fn, "backward needs heads == heads_k (GQA backward is not built)"); }
    BwdSizes const s = bwd_sizes(batch, seqlen_q, seqlen_k, heads, head_dim, causal);
    sizes[0] = s.dq_accum_bytes;
    sizes[1] = s.dsoftmax_sum_bytes;
    sizes[2] = s.softmax_lse_log2_bytes;
    sizes[3] = s.dq_semaphore_bytes;
    return 0;
}

int fa3_bwd(void* q, void* k, void* v, void* o, void* dout, float* lse,
            void* dq, void* dk, void* dv,
            float* dq_accum, float* dsoftmax_sum, float* softmax_lse_log2, int* dq_semaphore,
            int batch, int seqlen_q, int seqlen_k, int heads, int heads_k, int head_dim,
            float softmax_scale, int causal, cudaStream_t stream) {
    char const* fn = "fa3_bwd";
    if (int r = check_dims(fn, batch, seqlen_q, seqlen_k, heads, heads_k, head_dim)) { return r; }
    if (heads != heads_k) { return fail(fn, "backward needs heads == heads_k (GQA backward is not built)"); }
    if (!q || !k || !v || !o || !dout || !lse || !dq || !dk || !dv) {
        return fail(fn, "q, k, v, o, dout, lse, dq, dk and dv must be non-null");
    }
    if (!dq_accum || !dsoftmax_sum || !softmax_lse_log2 || !dq_semaphore) {
        return fail(fn, "dq_accum, dsoftmax_sum, softmax_lse_log2 and dq_semaphore must be non-null");
    }
    DeviceInfo dev;
    if (int r = device_info(fn, &dev)) { return r; }
    if (dev.arch != 90) { return fail(fn, "this build only has sm90 (compute capability 9.0) kernels"); }

    bool const is_causal = causal != 0;  // mha_bwd has no seqlen_q == 1 special case
    BwdSizes const s = bwd_sizes(batch, seqlen_q, seqlen_k, heads, head_dim, causal);

    Flash_bwd_params p{};  // set_common resets only the Flash_fwd_params part, as set_params_fprop does
    set_common(p, dev, q, k, v, o, lse, batch, seqlen_q, seqlen_k, s.seqlen_q_rounded, s.seqlen_k_rounded,
               heads, heads_k, head_dim, s.d_rounded, softmax_scale, is_causal);

    using index_t = Flash_bwd_params::index_t;
    index_t const row_q = index_t(heads) * head_dim;
    index_t const row_k = index_t(heads_k) * head_dim;
    p.do_ptr = dout;
    p.do_row_stride = row_q;
    p.do_head_stride = head_dim;
    p.dq_ptr = dq;
    p.dk_ptr = dk;
    p.dv_ptr = dv;
    p.dq_row_stride = row_q;
    p.dk_row_stride = row_k;
    p.dv_row_stride = row_k;
    p.dq_head_stride = head_dim;
    p.dk_head_stride = head_dim;
    p.dv_head_stride = head_dim;
    p.do_batch_stride = index_t(seqlen_q) * row_q;
    p.dq_batch_stride = index_t(seqlen_q) * row_q;
    p.dk_batch_stride = index_t(seqlen_k) * row_k;
    p.dv_batch_stride = index_t(seqlen_k) * row_k;

    p.dq_accum_ptr = dq_accum;
    p.dk_accum_ptr = nullptr;   // only for GQA
    p.dv_accum_ptr = nullptr;
    p.dsoftmax_sum = dsoftmax_sum;
    p.deterministic = false;
    p.softmax_lse_log2_ptr = softmax_lse_log2;
    p.dq_semaphore = dq_semaphore;  // zeroed by the preprocess kernel
    p.dk_semaphore = nullptr;       // only for GQA + deterministic
    p.dv_semaphore = nullptr;
    p.tile_count_semaphore = nullptr;

    if (s.d_rounded == 128) {
        run_mha_bwd_<90, cutlass::bfloat16_t, 128, false>(p, stream);
    }
#ifdef FA3_WITH_HDIM64
    else if (s.d_rounded == 64) {
        run_mha_bwd_<90, cutlass::bfloat16_t, 64, false>(p, stream);
    }
#endif
    else {
        return fail(fn, "unsupported head_dim");
    }
    return check_launch(fn);
}

}  // extern "C"
