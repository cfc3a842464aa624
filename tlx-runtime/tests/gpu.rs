//! Launches on a real GPU, with hand-written PTX standing in for generated
//! code. Every test skips, saying so, where there is no CUDA driver or GPU.

use tlx_core::ir::{Arch, ParamKind, ScalarType};
use tlx_runtime::testing::gpu_or_skip;
use tlx_runtime::{
    launch, ConfigSpec, Device, Error, Grid, KernelSpec, ParamSpec, PtrArg, ScalarArg,
};

/// `out[i] = flag ? a * x[i] + bias : x[i]` for `i < n`: one parameter of
/// every ABI size (pointer, f32, i32, bool, i64).
const SCALE_ADD_PTX: &str = r#"
.version 8.0
.target sm_90a
.address_size 64

.visible .entry scale_add(
    .param .u64 x,
    .param .u64 out,
    .param .f32 a,
    .param .u32 n,
    .param .u8 flag,
    .param .u64 bias
)
{
    .reg .pred %p<3>;
    .reg .b16 %h<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<4>;
    .reg .b64 %rd<7>;

    ld.param.u64 %rd1, [x];
    ld.param.u64 %rd2, [out];
    ld.param.f32 %f1, [a];
    ld.param.u32 %r1, [n];
    ld.param.u8 %h1, [flag];
    ld.param.u64 %rd3, [bias];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.s32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd4, %rd1;
    cvta.to.global.u64 %rd5, %rd2;
    mul.wide.s32 %rd6, %r5, 4;
    add.s64 %rd4, %rd4, %rd6;
    add.s64 %rd5, %rd5, %rd6;
    ld.global.f32 %f2, [%rd4];
    setp.eq.s16 %p2, %h1, 0;
    @%p2 bra STORE;
    cvt.rn.f32.s64 %f3, %rd3;
    fma.rn.f32 %f2, %f1, %f2, %f3;
STORE:
    st.global.f32 [%rd5], %f2;
DONE:
    ret;
}
"#;

/// Stores 42.0 in the last word of `bytes` of dynamic shared memory, reads
/// it back and writes it to `out[0]`.
const SHARED_LAST_PTX: &str = r#"
.version 8.0
.target sm_90a
.address_size 64

.extern .shared .align 16 .b8 smem[];

.visible .entry shared_last(
    .param .u64 out,
    .param .u32 last
)
{
    .reg .b32 %r<3>;
    .reg .f32 %f<3>;
    .reg .b64 %rd<3>;

    ld.param.u64 %rd1, [out];
    ld.param.u32 %r1, [last];
    mov.u32 %r2, smem;
    add.s32 %r2, %r2, %r1;
    mov.f32 %f1, 0f42280000;
    st.shared.f32 [%r2], %f1;
    bar.sync 0;
    ld.shared.f32 %f2, [%r2];
    cvta.to.global.u64 %rd2, %rd1;
    st.global.f32 [%rd2], %f2;
    ret;
}
"#;

static SCALE_ADD: KernelSpec = KernelSpec {
    name: "scale_add",
    params: &[
        ParamSpec {
            name: "x",
            kind: ParamKind::Ptr(ScalarType::F32),
        },
        ParamSpec {
            name: "out",
            kind: ParamKind::Ptr(ScalarType::F32),
        },
        ParamSpec {
            name: "a",
            kind: ParamKind::Scalar(ScalarType::F32),
        },
        ParamSpec {
            name: "n",
            kind: ParamKind::Scalar(ScalarType::I32),
        },
        ParamSpec {
            name: "flag",
            kind: ParamKind::Scalar(ScalarType::Bool),
        },
        ParamSpec {
            name: "bias",
            kind: ParamKind::Scalar(ScalarType::I64),
        },
    ],
    configs: &[
        ConfigSpec {
            consts: &[],
            num_warps: 4,
            cluster: [1, 1, 1],
            launch_pdl: false,
            shared_bytes: 0,
            global_scratch_bytes: 0,
            ptx: &[(Arch::Sm90a, SCALE_ADD_PTX)],
            ir: "",
            params: &[],
            bounds: None,
            timeline: None,
        },
        ConfigSpec {
            consts: &[],
            num_warps: 4,
            cluster: [1, 1, 1],
            launch_pdl: false,
            shared_bytes: 0,
            global_scratch_bytes: 0,
            ptx: &[(Arch::Sm100a, SCALE_ADD_PTX)],
            ir: "",
            params: &[],
            bounds: None,
            timeline: None,
        },
    ],
};

const SHARED_PARAMS: &[ParamSpec] = &[
    ParamSpec {
        name: "out",
        kind: ParamKind::Ptr(ScalarType::F32),
    },
    ParamSpec {
        name: "last",
        kind: ParamKind::Scalar(ScalarType::U32),
    },
];

static SHARED_LAST: KernelSpec = KernelSpec {
    name: "shared_last",
    params: SHARED_PARAMS,
    configs: &[
        ConfigSpec {
            consts: &[],
            num_warps: 1,
            cluster: [1, 1, 1],
            launch_pdl: false,
            shared_bytes: 200 * 1024,
            global_scratch_bytes: 0,
            ptx: &[(Arch::Sm90a, SHARED_LAST_PTX)],
            ir: "",
            params: &[],
            bounds: None,
            timeline: None,
        },
        ConfigSpec {
            consts: &[],
            num_warps: 1,
            cluster: [1, 1, 1],
            launch_pdl: false,
            shared_bytes: 400 * 1024,
            global_scratch_bytes: 0,
            ptx: &[(Arch::Sm90a, SHARED_LAST_PTX)],
            ir: "",
            params: &[],
            bounds: None,
            timeline: None,
        },
    ],
};

fn scale_add_reference(x: &[f32], a: f32, n: usize, bias: i64) -> Vec<f32> {
    x.iter()
        .enumerate()
        .map(|(i, &v)| {
            if i < n {
                a.mul_add(v, bias as f32)
            } else {
                0.0
            }
        })
        .collect()
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn every_abi_size_reaches_the_kernel() -> Result<(), Error> {
    let Some(device) = gpu_or_skip() else {
        return Ok(());
    };
    let x: Vec<f32> = (0..1000).map(|i| i as f32 * 0.5).collect();
    let input = device.upload(&x)?;
    let out = device.alloc_zeros::<f32>(x.len())?;
    let args = [
        input.kernel_arg(),
        out.kernel_arg(),
        2.0f32.kernel_arg(),
        900i32.kernel_arg(),
        true.kernel_arg(),
        (-3i64).kernel_arg(),
    ];
    launch(&device, &SCALE_ADD, 0, Grid::from(8), &args)?;
    assert_eq!(out.download()?, scale_add_reference(&x, 2.0, 900, -3));

    // flag = false copies; a view shifts both pointers.
    let shifted = device.alloc_zeros::<f32>(x.len())?;
    let args = [
        input.slice(10..)?.kernel_arg(),
        shifted.slice(10..)?.kernel_arg(),
        2.0f32.kernel_arg(),
        990i32.kernel_arg(),
        false.kernel_arg(),
        0i64.kernel_arg(),
    ];
    launch(&device, &SCALE_ADD, 0, Grid::from(8), &args)?;
    let got = shifted.download()?;
    assert_eq!(&got[..10], &[0.0; 10]);
    assert_eq!(&got[10..], &x[10..]);
    Ok(())
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn cudarc_slices_are_kernel_arguments() -> Result<(), Error> {
    let Some(device) = gpu_or_skip() else {
        return Ok(());
    };
    let stream = device.cuda_stream()?.clone();
    let x: Vec<f32> = (0..256).map(|i| i as f32).collect();
    let input = stream
        .clone_htod(&x)
        .map_err(|e| Error::NoGpu(e.to_string()))?;
    let out = stream
        .alloc_zeros::<f32>(x.len())
        .map_err(|e| Error::NoGpu(e.to_string()))?;
    let out_view = out.slice(..);
    let args = [
        PtrArg::<f32>::kernel_arg(&input),
        PtrArg::<f32>::kernel_arg(&out_view),
        1.0f32.kernel_arg(),
        256i32.kernel_arg(),
        true.kernel_arg(),
        1i64.kernel_arg(),
    ];
    launch(&device, &SCALE_ADD, 0, Grid::from(2), &args)?;
    let got = stream
        .clone_dtoh(&out)
        .map_err(|e| Error::NoGpu(e.to_string()))?;
    assert_eq!(got, scale_add_reference(&x, 1.0, 256, 1));
    Ok(())
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn device_limits_and_architectures_are_checked() -> Result<(), Error> {
    let Some(device) = gpu_or_skip() else {
        return Ok(());
    };
    assert!(device.is_gpu());
    // H100 and H200 have 132 SMs (PCIe H100: 114); any Hopper has dozens.
    assert!((16..=1024).contains(&device.multiprocessor_count()));
    let out = device.alloc_zeros::<f32>(1)?;
    let args = [out.kernel_arg(), (200 * 1024 - 4u32).kernel_arg()];
    launch(&device, &SHARED_LAST, 0, Grid::from(1), &args)?;
    assert_eq!(out.download()?, vec![42.0]);

    let too_much = launch(&device, &SHARED_LAST, 1, Grid::from(1), &args);
    assert!(
        matches!(too_much, Err(Error::SharedMemory { .. })),
        "{too_much:?}"
    );

    let x = device.alloc_zeros::<f32>(4)?;
    let args = [
        x.kernel_arg(),
        x.kernel_arg(),
        1.0f32.kernel_arg(),
        4i32.kernel_arg(),
        true.kernel_arg(),
        0i64.kernel_arg(),
    ];
    let message = match launch(&device, &SCALE_ADD, 1, Grid::from(1), &args) {
        Err(e) => e.to_string(),
        Ok(()) => panic!("sm_100a PTX launched on {}", device.name()),
    };
    assert!(
        message.starts_with("kernel `scale_add` has PTX for sm_100a only; this device is sm_"),
        "{message}"
    );

    let cpu = Device::cpu();
    let host = cpu.alloc_zeros::<f32>(4)?;
    let args = [
        host.kernel_arg(),
        x.kernel_arg(),
        1.0f32.kernel_arg(),
        4i32.kernel_arg(),
        true.kernel_arg(),
        0i64.kernel_arg(),
    ];
    let wrong = launch(&device, &SCALE_ADD, 0, Grid::from(1), &args);
    assert!(
        matches!(wrong, Err(Error::WrongDevice { param: "x", .. })),
        "{wrong:?}"
    );
    Ok(())
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn timing_measures_gpu_work() -> Result<(), Error> {
    let Some(device) = gpu_or_skip() else {
        return Ok(());
    };
    let n = 1 << 24;
    let x = device.alloc_zeros::<f32>(n)?;
    let out = device.alloc::<f32>(n)?;
    let args = [
        x.kernel_arg(),
        out.kernel_arg(),
        1.0f32.kernel_arg(),
        (n as i32).kernel_arg(),
        true.kernel_arg(),
        0i64.kernel_arg(),
    ];
    let ms = device.time(|| launch(&device, &SCALE_ADD, 0, Grid::try_from(n / 128)?, &args))?;
    assert!(ms > 0.0 && ms < 1000.0, "{ms} ms");
    device.synchronize()?;
    eprintln!("scale_add over {n} floats on {}: {ms:.3} ms", device.name());
    Ok(())
}
