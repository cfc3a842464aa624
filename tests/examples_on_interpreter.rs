//! Every example, run on the CPU interpreter against its CPU reference: how
//! CI (which has no GPU) checks kernel semantics end to end.

// Each example brings its own copy of `examples/common`, as it does when built alone.
#![allow(clippy::duplicate_mod)]

#[path = "../examples/blackwell_gemm_ws.rs"]
#[allow(dead_code)]
mod blackwell_gemm_ws;
#[path = "../examples/cluster_exchange.rs"]
#[allow(dead_code)]
mod cluster_exchange;
#[path = "../examples/dropout.rs"]
#[allow(dead_code)]
mod dropout;
#[path = "../examples/hopper_fa_bwd.rs"]
#[allow(dead_code)]
mod hopper_fa_bwd;
#[path = "../examples/hopper_fa_fwd.rs"]
#[allow(dead_code)]
mod hopper_fa_fwd;
#[path = "../examples/hopper_gemm_cluster.rs"]
#[allow(dead_code)]
mod hopper_gemm_cluster;
#[path = "../examples/hopper_gemm_fp8.rs"]
#[allow(dead_code)]
mod hopper_gemm_fp8;
#[path = "../examples/hopper_gemm_pipe.rs"]
#[allow(dead_code)]
mod hopper_gemm_pipe;
#[path = "../examples/hopper_gemm_pipelined.rs"]
#[allow(dead_code)]
mod hopper_gemm_pipelined;
#[path = "../examples/hopper_gemm_ws.rs"]
#[allow(dead_code)]
mod hopper_gemm_ws;
#[path = "../examples/layernorm.rs"]
#[allow(dead_code)]
mod layernorm;
#[path = "../examples/matmul.rs"]
#[allow(dead_code)]
mod matmul;
#[path = "../examples/softmax.rs"]
#[allow(dead_code)]
mod softmax;
#[path = "../examples/stream_compaction.rs"]
#[allow(dead_code)]
mod stream_compaction;
#[path = "../examples/vector_add.rs"]
#[allow(dead_code)]
mod vector_add;

fn on_interpreter(run: fn(&tlx::Device) -> Result<(), Box<dyn std::error::Error>>) {
    if let Err(e) = run(&tlx::Device::cpu()) {
        panic!("{e}");
    }
}

#[test]
fn dropout_matches_reference() {
    on_interpreter(dropout::run);
}

#[test]
fn hopper_fa_bwd_matches_reference() {
    on_interpreter(hopper_fa_bwd::run);
}

#[test]
fn hopper_fa_fwd_matches_reference() {
    on_interpreter(hopper_fa_fwd::run);
}

/// The forward's split tail (the last round's tiles shared along the keys
/// by two or three programs and merged by the last to finish), on grids
/// of a set size whatever the host's thread count.
#[test]
fn hopper_fa_fwd_split_tail_matches_reference() {
    use tlx::half::{bf16, f16};
    use tlx::ops::Attention;
    let mut rng = hopper_fa_fwd::common::Rng::fresh("hopper_fa_fwd split tail");
    // (multiprocessors, problem, f16): each leaves a last round that not
    // every program has work in.
    let cases = [
        // Three 3-step tiles on two programs: the third split 1 + 2.
        (
            2,
            Attention::new(1, 3, 100, 64).kv_heads(1).seq_kv(300),
            false,
        ),
        // Three causal pairs of 2 + 1 steps on two: the last pair's long tile split.
        (
            2,
            Attention::new(1, 3, 250, 128)
                .kv_heads(1)
                .seq_kv(256)
                .causal(true),
            true,
        ),
        // Four causal pairs of 4 + 1 steps on three: one long tile in three parts.
        (
            3,
            Attention::new(1, 2, 500, 64).seq_kv(512).causal(true),
            false,
        ),
        // One 2-step tile left for five programs: two take a step each.
        (5, Attention::new(1, 6, 100, 64).kv_heads(2).seq_kv(150), false),
        // Three 6-step tiles on five programs, ragged keys and queries.
        (
            5,
            Attention::new(2, 2, 130, 64).kv_heads(1).seq_kv(700),
            true,
        ),
    ];
    for (multiprocessors, problem, half) in cases {
        let device = tlx::Device::cpu_with_multiprocessors(multiprocessors);
        let outcome = if half {
            hopper_fa_fwd::check::<f16>(&device, &mut rng, &problem)
        } else {
            hopper_fa_fwd::check::<bf16>(&device, &mut rng, &problem)
        };
        if let Err(e) = outcome {
            panic!("{problem} on {multiprocessors} programs: {e}");
        }
    }
}

#[test]
fn hopper_gemm_pipelined_matches_reference() {
    on_interpreter(hopper_gemm_pipelined::run);
}

#[test]
fn hopper_gemm_fp8_matches_reference() {
    on_interpreter(hopper_gemm_fp8::run);
}

#[test]
fn hopper_gemm_pipe_matches_reference() {
    on_interpreter(hopper_gemm_pipe::run);
}

#[test]
fn cluster_exchange_matches_reference() {
    on_interpreter(cluster_exchange::run);
}

#[test]
fn hopper_gemm_cluster_matches_reference() {
    on_interpreter(hopper_gemm_cluster::run);
}

#[test]
fn blackwell_gemm_ws_matches_reference() {
    on_interpreter(blackwell_gemm_ws::run);
}

#[test]
fn hopper_gemm_ws_matches_reference() {
    on_interpreter(hopper_gemm_ws::run);
}

#[test]
fn vector_add_matches_reference() {
    on_interpreter(vector_add::run);
}

#[test]
fn softmax_matches_reference() {
    on_interpreter(softmax::run);
}

#[test]
fn layernorm_matches_reference() {
    on_interpreter(layernorm::run);
}

#[test]
fn matmul_matches_reference() {
    on_interpreter(matmul::run);
}

#[test]
fn stream_compaction_matches_reference() {
    on_interpreter(stream_compaction::run);
}
