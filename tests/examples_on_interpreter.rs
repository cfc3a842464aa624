//! Every example, run on the CPU interpreter against its CPU reference: how
//! CI (which has no GPU) checks kernel semantics end to end.

// Each example brings its own copy of `examples/common`, as it does when built alone.
#![allow(clippy::duplicate_mod)]

#[path = "../examples/blackwell_fa_bwd.rs"]
#[allow(dead_code)]
mod blackwell_fa_bwd;
#[path = "../examples/blackwell_fa_fwd.rs"]
#[allow(dead_code)]
mod blackwell_fa_fwd;
#[path = "../examples/blackwell_gemm_2cta.rs"]
#[allow(dead_code)]
mod blackwell_gemm_2cta;
#[path = "../examples/blackwell_gemm_clc.rs"]
#[allow(dead_code)]
mod blackwell_gemm_clc;
#[path = "../examples/blackwell_gemm_mxfp8.rs"]
#[allow(dead_code)]
mod blackwell_gemm_mxfp8;
#[path = "../examples/blackwell_gemm_ws.rs"]
#[allow(dead_code)]
mod blackwell_gemm_ws;
#[path = "../examples/cluster_exchange.rs"]
#[allow(dead_code)]
mod cluster_exchange;
#[path = "../examples/dist_gemm.rs"]
#[allow(dead_code)]
mod dist_gemm;
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
#[path = "../examples/hopper_grouped_gemm.rs"]
#[allow(dead_code)]
mod hopper_grouped_gemm;
#[path = "../examples/hopper_grouped_gemm_fp8.rs"]
#[allow(dead_code)]
mod hopper_grouped_gemm_fp8;
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
fn dist_gemm_matches_reference() {
    on_interpreter(dist_gemm::run);
}

#[test]
fn hopper_grouped_gemm_matches_reference() {
    on_interpreter(hopper_grouped_gemm::run);
}

#[test]
fn hopper_grouped_gemm_fp8_matches_reference() {
    on_interpreter(hopper_grouped_gemm_fp8::run);
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
fn blackwell_fa_bwd_matches_reference() {
    on_interpreter(blackwell_fa_bwd::run);
}

#[test]
fn blackwell_fa_fwd_matches_reference() {
    on_interpreter(blackwell_fa_fwd::run);
}

#[test]
fn blackwell_gemm_2cta_matches_reference() {
    on_interpreter(blackwell_gemm_2cta::run);
}

#[test]
fn blackwell_gemm_clc_matches_reference() {
    on_interpreter(blackwell_gemm_clc::run);
}

#[test]
fn blackwell_gemm_mxfp8_matches_reference() {
    on_interpreter(blackwell_gemm_mxfp8::run);
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
