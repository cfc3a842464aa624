//! A kernel that faults on the GPU: the error surfaces at the next
//! synchronize with the driver's name and a hint. Its own test binary,
//! because a fault poisons the process's CUDA context.

use tlx_core::ir::Arch;
use tlx_runtime::testing::gpu_or_skip;
use tlx_runtime::{launch, ConfigSpec, Error, Grid, KernelSpec};

const STORE_TO_NULL_PTX: &str = r#"
.version 8.0
.target sm_90a
.address_size 64

.visible .entry store_to_null()
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<2>;
    mov.u64 %rd1, 16;
    mov.u32 %r1, 7;
    st.global.u32 [%rd1], %r1;
    ret;
}
"#;

static STORE_TO_NULL: KernelSpec = KernelSpec {
    name: "store_to_null",
    params: &[],
    configs: &[ConfigSpec {
        consts: &[],
        num_warps: 1,
        cluster: [1, 1, 1],
        launch_pdl: false,
        shared_bytes: 0,
        global_scratch_bytes: 0,
        ptx: &[(Arch::Sm90a, STORE_TO_NULL_PTX)],
        ir: "",
        params: &[],
        bounds: None,
        timeline: None,
    }],
};

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn an_illegal_address_is_reported_with_a_hint() {
    let Some(device) = gpu_or_skip() else {
        return;
    };
    let launched = launch(&device, &STORE_TO_NULL, 0, Grid::from(1), &[]);
    let result = launched.and_then(|()| device.synchronize());
    let message = match result {
        Err(e @ Error::Cuda { .. }) => e.to_string(),
        other => panic!("expected a CUDA error, got {other:?}"),
    };
    assert!(message.contains("CUDA_ERROR_ILLEGAL_ADDRESS"), "{message}");
    assert!(message.contains("TLX_INTERPRET=1"), "{message}");
}
