//! Launches on the CPU interpreter from embedded IR text, as a
//! macro-generated launcher does.

use tlx_core::ir::{ParamKind, ScalarType};
use tlx_runtime::{
    launch, ConfigSpec, Device, Error, Grid, KernelSpec, ParamSpec, PtrArg, ScalarArg,
};

/// `out[i] = x[i] + y[i]` for `i < n`, 8 elements per program.
const ADD_IR: &str = r#"
kernel "add" {
  source "tests/cpu.rs"
  options num_warps 1 num_stages 1
  const "BLOCK" 8
  param "x" %0 ptr<f32>
  param "y" %1 ptr<f32>
  param "out" %2 ptr<f32>
  param "n" %3 i32
  %4 = program_id 0 : i32  // line 3:15
  %5 = constant 8 : i32
  %6 = mul %4, %5 : i32  // line 4:15
  %7 = arange 0, 8 : tensor<8xi32>
  %8 = splat %6 : tensor<8xi32>
  %9 = add %8, %7 : tensor<8xi32>  // line 5:15
  %10 = splat %3 : tensor<8xi32>
  %11 = cmp lt %9, %10 : tensor<8xbool>  // line 6:15
  %12 = splat %0 : tensor<8xptr<f32>>
  %13 = addptr %12, %9 : tensor<8xptr<f32>>
  %14 = load %13 mask %11 : tensor<8xf32>  // line 7:15
  %15 = splat %1 : tensor<8xptr<f32>>
  %16 = addptr %15, %9 : tensor<8xptr<f32>>
  %17 = load %16 mask %11 : tensor<8xf32>  // line 8:15
  %18 = add %14, %17 : tensor<8xf32>
  %19 = splat %2 : tensor<8xptr<f32>>
  %20 = addptr %19, %9 : tensor<8xptr<f32>>
  store %20, %18 mask %11  // line 9:5
}
"#;

const fn ptr(name: &'static str) -> ParamSpec {
    ParamSpec {
        name,
        kind: ParamKind::Ptr(ScalarType::F32),
    }
}

/// What each configuration of `add` takes (descriptor blocks could differ
/// between configurations; here nothing does).
const ADD_PARAMS: &[ParamKind] = &[
    ParamKind::Ptr(ScalarType::F32),
    ParamKind::Ptr(ScalarType::F32),
    ParamKind::Ptr(ScalarType::F32),
    ParamKind::Scalar(ScalarType::I32),
];

static ADD: KernelSpec = KernelSpec {
    name: "add",
    params: &[
        ptr("x"),
        ptr("y"),
        ptr("out"),
        ParamSpec {
            name: "n",
            kind: ParamKind::Scalar(ScalarType::I32),
        },
    ],
    configs: &[
        ConfigSpec {
            consts: &[("BLOCK", 8)],
            num_warps: 1,
            cluster: [1, 1, 1],
            launch_pdl: false,
            shared_bytes: 0,
            global_scratch_bytes: 0,
            ptx: &[],
            ir: ADD_IR,
            params: ADD_PARAMS,
            bounds: None,
            timeline: None,
        },
        ConfigSpec {
            consts: &[("BLOCK", 8)],
            num_warps: 1,
            cluster: [1, 1, 1],
            launch_pdl: false,
            shared_bytes: 0,
            global_scratch_bytes: 0,
            ptx: &[],
            ir: "kernel \"add\" {\n  %1 = frobnicate\n}\n",
            params: &[],
            bounds: None,
            timeline: None,
        },
    ],
};

#[test]
fn a_kernel_runs_on_the_interpreter() -> Result<(), Error> {
    let device = Device::cpu();
    let x: Vec<f32> = (0..20).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..20).map(|i| 100.0 * i as f32).collect();
    let (xs, ys) = (device.upload(&x)?, device.upload(&y)?);
    let out = device.alloc_zeros::<f32>(20)?;
    let args = [
        xs.kernel_arg(),
        ys.kernel_arg(),
        out.kernel_arg(),
        20i32.kernel_arg(),
    ];
    launch(&device, &ADD, 0, Grid::from(3), &args)?;
    let expected: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a + b).collect();
    assert_eq!(out.download()?, expected);

    // Views shift every pointer; the tail past n stays untouched.
    let shifted = device.alloc_zeros::<f32>(20)?;
    let args = [
        xs.slice(4..)?.kernel_arg(),
        ys.slice(4..)?.kernel_arg(),
        shifted.slice(4..)?.kernel_arg(),
        10i32.kernel_arg(),
    ];
    launch(&device, &ADD, 0, Grid::from(2), &args)?;
    let got = shifted.download()?;
    assert_eq!(&got[..4], &[0.0; 4]);
    assert_eq!(&got[4..14], &expected[4..14]);
    assert_eq!(&got[14..], &[0.0; 6]);
    Ok(())
}

#[test]
fn interpreter_errors_name_the_kernel() -> Result<(), Error> {
    let device = Device::cpu();
    let small = device.alloc_zeros::<f32>(4)?;
    let args = [
        small.kernel_arg(),
        small.kernel_arg(),
        small.kernel_arg(),
        8i32.kernel_arg(),
    ];
    match launch(&device, &ADD, 0, Grid::from(1), &args) {
        Err(e @ Error::Interpreter { kernel: "add", .. }) => {
            assert!(
                e.to_string()
                    .starts_with("kernel `add` failed in the CPU interpreter: "),
                "{e}"
            );
        }
        other => panic!("expected an out-of-bounds error, got {other:?}"),
    }
    Ok(())
}

#[test]
fn broken_embedded_ir_is_reported() -> Result<(), Error> {
    let device = Device::cpu();
    let b = device.alloc_zeros::<f32>(4)?;
    let args = [
        b.kernel_arg(),
        b.kernel_arg(),
        b.kernel_arg(),
        4i32.kernel_arg(),
    ];
    let message = match launch(&device, &ADD, 1, Grid::from(1), &args) {
        Err(e @ Error::BadIr { .. }) => e.to_string(),
        other => panic!("expected BadIr, got {other:?}"),
    };
    assert!(
        message.contains("line 2: unknown op `frobnicate`"),
        "{message}"
    );
    Ok(())
}
