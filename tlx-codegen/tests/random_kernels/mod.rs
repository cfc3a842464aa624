//! Random valid kernels (issue 52): family.rs draws a kernel (block-level:
//! elementwise with masks, reductions, scans, dots, atomics; TLX-level:
//! `cp.async` and TMA rings, a warp-specialized producer and replicated
//! consumers on mbarriers or through a `pipe!`, a cluster ring over
//! distributed shared memory, a named-barrier handoff) with a random
//! expression (expr.rs), and what it must compute. Each goes through the
//! frontend and the protocol checker, which must accept it (a refusal is a
//! false positive, a failure), then runs through the runtime on the CPU
//! interpreter (once as the runtime launches it, once under a random
//! schedule of its tasks with reads of unwritten memory reported), and on
//! the GPU when there is one, on fresh random inputs with every output
//! poisoned first. A failure prints the seed that makes it again and the
//! kernel shrunk to a smallest failing form. bugs.rs puts one
//! synchronization bug into such kernels: the checker must refuse each.
//!
//! `TLX_RANDOM_KERNELS` (how many; 400 on the interpreter, 1000 on the
//! GPU), `TLX_RANDOM_SEED` (default: from the clock, printed),
//! `TLX_RANDOM_ONLY=i` (one case of the seed).

mod bugs;
mod expr;
mod family;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use family::{Buffer, Case, Data, Elem, Role, Want};
use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions, Schedule};
use tlx_core::ir::{Arch, Kernel};
use tlx_runtime::{Device, Grid, KernelArg, KernelSpec, ParamSpec, PtrArg, ScalarArg, TensorDesc};

use crate::codegen_common::{assemble, ptxas};

/// splitmix64.
pub struct Rng(u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The case `index` of the run with `seed`.
fn case_of(seed: u64, index: usize) -> (Case, Rng) {
    let mut rng = Rng(seed ^ (index as u64).wrapping_mul(0xA24B_AED4_963E_E407));
    let case = Case::random(&mut rng);
    (case, rng)
}

/// A case compiled for the runtime.
struct Built {
    spec: &'static KernelSpec,
    kernel: Kernel,
}

/// The kernel of `case` through the frontend, the checker and code
/// generation (PTX and `ptxas` when `ptx`), as a leaked spec the runtime
/// launches like a macro-made one.
fn build(case: &Case, ptx: bool) -> Result<Built, String> {
    let source = case.source();
    let kernel = tlx_frontend::compile_str(&source)
        .map_err(|d| format!("the frontend refused it:\n{d}"))?
        .remove(0);
    let report = tlx_core::check::check_protocol(&kernel);
    if !report.errors.is_empty() {
        let said: Vec<String> = report.errors.iter().map(|f| format!("{f:?}")).collect();
        return Err(format!(
            "the protocol checker refused it (a false positive):\n{}",
            said.join("\n")
        ));
    }
    let arch = Arch::Sm90a;
    let compiled = if ptx {
        tlx_codegen::compile(&kernel, arch)
    } else {
        tlx_codegen::check(&kernel, arch)
    }
    .map_err(|e| format!("code generation failed: {e}"))?;
    if ptx {
        if let Some(ptxas) = ptxas() {
            std::panic::catch_unwind(|| assemble(&ptxas, arch, "random", &compiled.ptx))
                .map_err(|_| "ptxas refused its PTX".to_string())?;
        }
    }
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let params: Vec<ParamSpec> = kernel
        .params
        .iter()
        .map(|p| ParamSpec {
            name: leak(p.name.clone()),
            kind: p.kind,
        })
        .collect();
    let kinds: Vec<_> = kernel.params.iter().map(|p| p.kind).collect();
    let ptx_list: &'static [(Arch, &'static str)] = if ptx {
        Box::leak(vec![(arch, leak(compiled.ptx.clone()))].into_boxed_slice())
    } else {
        &[]
    };
    let config = tlx_runtime::ConfigSpec {
        consts: &[],
        num_warps: kernel.total_warps(),
        cluster: kernel.options.cluster,
        launch_pdl: false,
        shared_bytes: compiled.shared_bytes,
        global_scratch_bytes: compiled.global_scratch_bytes,
        ptx: ptx_list,
        ir: leak(kernel.to_string()),
        params: Box::leak(kinds.into_boxed_slice()),
        bounds: None,
        timeline: None,
    };
    let spec = Box::leak(Box::new(KernelSpec {
        name: leak(kernel.name.clone()),
        params: Box::leak(params.into_boxed_slice()),
        configs: Box::leak(vec![config].into_boxed_slice()),
    }));
    Ok(Built { spec, kernel })
}

/// Fresh contents for each buffer: inputs random, outputs poisoned,
/// accumulators random starting values.
fn fill(buffers: &[Buffer], rng: &mut Rng) -> Vec<Data> {
    buffers
        .iter()
        .map(|b| match (b.elem, b.role) {
            (Elem::F32, Role::Output) => Data::F32(vec![f32::NAN; b.len]),
            (Elem::F32, _) => Data::F32(
                (0..b.len)
                    .map(|_| (rng.unit() * 4.0 - 2.0) as f32)
                    .collect(),
            ),
            (Elem::F16, Role::Output) => Data::F16(vec![half::f16::NAN; b.len]),
            (Elem::F16, _) => Data::F16(
                (0..b.len)
                    .map(|_| half::f16::from_f64(rng.unit() * 4.0 - 2.0))
                    .collect(),
            ),
            (Elem::I32, Role::Output) => Data::I32(vec![0x5a5a_5a5a; b.len]),
            (Elem::I32, _) => {
                Data::I32((0..b.len).map(|_| rng.below(2001) as i32 - 1000).collect())
            }
        })
        .collect()
}

/// A buffer on a device.
enum DeviceBuffer {
    F32(tlx_runtime::Buffer<f32>),
    F16(tlx_runtime::Buffer<half::f16>),
    I32(tlx_runtime::Buffer<i32>),
}

/// Runs `built` on `device` over `data`; every buffer as it is after.
fn run(
    device: &Device,
    built: &Built,
    plans: &[Buffer],
    programs: u32,
    data: &[Data],
    scalars: &[i32],
) -> Result<Vec<Data>, String> {
    let on = |e: tlx_runtime::Error| format!("on {}: {e}", device.name());
    let buffers = data
        .iter()
        .map(|d| {
            Ok(match d {
                Data::F32(v) => DeviceBuffer::F32(device.upload(v).map_err(on)?),
                Data::F16(v) => DeviceBuffer::F16(device.upload(v).map_err(on)?),
                Data::I32(v) => DeviceBuffer::I32(device.upload(v).map_err(on)?),
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let mut args: Vec<KernelArg<'_>> = Vec::new();
    for (b, plan) in buffers.iter().zip(plans) {
        args.push(match (b, plan.matrix) {
            (DeviceBuffer::F32(b), Some([rows, cols])) => {
                TensorDesc::matrix(b, rows, cols).map_err(on)?.kernel_arg()
            }
            (DeviceBuffer::F32(b), None) => PtrArg::<f32>::kernel_arg(b),
            (DeviceBuffer::F16(b), _) => PtrArg::<half::f16>::kernel_arg(b),
            (DeviceBuffer::I32(b), _) => PtrArg::<i32>::kernel_arg(b),
        });
    }
    args.extend(scalars.iter().map(|&s| ScalarArg::kernel_arg(s)));
    tlx_runtime::launch(device, built.spec, 0, Grid::from(programs), &args).map_err(on)?;
    buffers
        .iter()
        .map(|b| {
            Ok(match b {
                DeviceBuffer::F32(b) => Data::F32(b.download().map_err(on)?),
                DeviceBuffer::F16(b) => Data::F16(b.download().map_err(on)?),
                DeviceBuffer::I32(b) => Data::I32(b.download().map_err(on)?),
            })
        })
        .collect()
}

/// Runs `kernel` on the interpreter directly, its tasks interleaved by a
/// random schedule (`schedule`) and reads of unwritten memory reported:
/// a correct kernel gives the same result under every interleaving.
fn run_scheduled(
    kernel: &Kernel,
    plans: &[Buffer],
    programs: u32,
    data: &[Data],
    scalars: &[i32],
    schedule: u64,
) -> Result<Vec<Data>, String> {
    let mem = HostMemory::new();
    let bytes = |d: &Data| -> Vec<u8> {
        match d {
            Data::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            Data::F16(v) => v.iter().flat_map(|x| x.to_bits().to_le_bytes()).collect(),
            Data::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        }
    };
    let mut ids = Vec::new();
    let mut args = Vec::new();
    for (d, plan) in data.iter().zip(plans) {
        let b = bytes(d);
        let id = mem.alloc(b.len());
        mem.write(id, 0, &b).map_err(|e| e.to_string())?;
        ids.push((id, b.len()));
        args.push(match plan.matrix {
            Some([rows, cols]) => ArgValue::TensorDesc {
                buffer: id,
                offset_elems: 0,
                elem: tlx_core::ir::ScalarType::F32,
                rank: 2,
                shape: [rows as i64, cols as i64, 1, 1, 1],
                strides: [cols as i64, 1, 1, 1, 1],
            },
            None => ArgValue::ptr(id),
        });
    }
    args.extend(scalars.iter().map(|&s| ArgValue::i32(s)));
    let options = InterpOptions::new(0, true).with_schedule(Schedule::Random { seed: schedule });
    run_kernel(kernel, [programs, 1, 1], &args, &mem, &options)
        .map_err(|e| format!("with TLX_SCHEDULE=random:{schedule}: {e}"))?;
    data.iter()
        .zip(ids)
        .map(|(d, (id, len))| {
            let mut out = vec![0u8; len];
            mem.read(id, 0, &mut out).map_err(|e| e.to_string())?;
            Ok(match d {
                Data::F32(_) => Data::F32(
                    out.chunks(4)
                        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ),
                Data::F16(_) => Data::F16(
                    out.chunks(2)
                        .map(|c| half::f16::from_bits(u16::from_le_bytes([c[0], c[1]])))
                        .collect(),
                ),
                Data::I32(_) => Data::I32(
                    out.chunks(4)
                        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                        .collect(),
                ),
            })
        })
        .collect()
}

/// How close a GPU's float must be to the exact reference: its compiler
/// may contract a multiply and an add into one rounding.
const GPU_FLOAT_SLACK: f64 = 2e-5;

/// The first element of `got` that differs from what the case wants.
fn compare(case: &Case, before: &[Data], got: &[Data], slack: f64) -> Result<(), String> {
    for (buffer, wants) in case.expected(before) {
        let name = case.buffers().0[buffer].name;
        for (k, want) in wants.iter().enumerate() {
            let Some(want) = want else { continue };
            let g = got[buffer].at(k);
            let ok = match (*want, g) {
                (Want::Exact(expr::V::I(w)), expr::V::I(g)) => w == g,
                (Want::Exact(expr::V::F(w)), expr::V::F(g)) => {
                    w == g
                        || (w.is_nan() && g.is_nan())
                        || (f64::from(g - w).abs() <= slack * f64::from(w.abs()).max(1.0))
                }
                (Want::Near { value, tolerance }, expr::V::F(g)) => {
                    (f64::from(g) - value).abs() <= tolerance + slack * value.abs().max(1.0)
                }
                _ => false,
            };
            if !ok {
                return Err(format!("`{name}[{k}]` is {g:?}, want {want:?}"));
            }
        }
    }
    Ok(())
}

/// One case on the interpreter (and the GPU, when given): `Err` names
/// what went wrong.
fn try_case(
    case: &Case,
    rng: &mut Rng,
    ptx: bool,
    gpu: Option<&Mutex<Device>>,
    exact_gpu: &AtomicUsize,
) -> Result<(), String> {
    let built = std::panic::catch_unwind(|| build(case, ptx))
        .map_err(|_| "the compiler panicked".to_string())??;
    let (buffers, scalars) = case.buffers();
    let before = fill(&buffers, rng);
    let cpu = Device::cpu();
    let interpreted = run(&cpu, &built, &buffers, case.programs(), &before, &scalars)?;
    compare(case, &before, &interpreted, 0.0).map_err(|e| format!("the interpreter: {e}"))?;
    let schedule = rng.next();
    let scheduled = run_scheduled(
        &built.kernel,
        &buffers,
        case.programs(),
        &before,
        &scalars,
        schedule,
    )?;
    if scheduled != interpreted {
        compare(case, &before, &scheduled, 0.0)
            .map_err(|e| format!("the interpreter with TLX_SCHEDULE=random:{schedule}: {e}"))?;
    }
    if let Some(gpu) = gpu {
        let device = gpu.lock().unwrap_or_else(|e| e.into_inner());
        let on_gpu = run(
            &device,
            &built,
            &buffers,
            case.programs(),
            &before,
            &scalars,
        )?;
        drop(device);
        compare(case, &before, &on_gpu, GPU_FLOAT_SLACK).map_err(|e| format!("the GPU: {e}"))?;
        if on_gpu == interpreted {
            exact_gpu.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok(())
}

/// The smallest form of a failing case that still fails (greedy: the
/// first smaller form that fails replaces it, until none does).
fn shrink(
    case: Case,
    seed: u64,
    index: usize,
    ptx: bool,
    gpu: Option<&Mutex<Device>>,
) -> (Case, String) {
    let exact = AtomicUsize::new(0);
    let fails = |c: &Case| {
        let (_, mut rng) = case_of(seed, index);
        try_case(c, &mut rng, ptx, gpu, &exact).err()
    };
    let mut why = fails(&case).unwrap_or_else(|| "passed when run again".to_string());
    let mut current = case;
    let mut tries = 0;
    'smaller: while tries < 300 {
        for candidate in current.shrunk() {
            tries += 1;
            if let Some(w) = fails(&candidate) {
                current = candidate;
                why = w;
                continue 'smaller;
            }
        }
        break;
    }
    (current, why)
}

/// `TLX_RANDOM_SEED`, else one from the clock (printed with every run).
fn seed() -> u64 {
    env_number("TLX_RANDOM_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    })
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|v| v.parse().ok())
}

/// Runs `count` cases (on the GPU too when `gpu`), on all cores; panics
/// listing every failure, shrunk.
fn run_cases(default_count: usize, gpu: Option<Device>) {
    let count = env_number("TLX_RANDOM_KERNELS").map_or(default_count, |n| n as usize);
    let seed = seed();
    let indices: Vec<usize> = match env_number("TLX_RANDOM_ONLY") {
        Some(i) => vec![i as usize],
        None => (0..count).collect(),
    };
    let on_gpu = gpu.is_some();
    println!(
        "random kernels: {} cases, TLX_RANDOM_SEED={seed}{}",
        indices.len(),
        if on_gpu {
            ", on the GPU and the interpreter"
        } else {
            ""
        }
    );
    let gpu = gpu.map(Mutex::new);
    let next = AtomicUsize::new(0);
    let exact_gpu = AtomicUsize::new(0);
    let failures = Mutex::new(Vec::new());
    let families = Mutex::new(std::collections::BTreeMap::<&str, usize>::new());
    let started = std::time::Instant::now();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let at = next.fetch_add(1, Ordering::Relaxed);
                let Some(&index) = indices.get(at) else { break };
                let (case, mut rng) = case_of(seed, index);
                // On the interpreter alone every fourth case also goes
                // through LLVM and ptxas.
                let ptx = on_gpu || index % 4 == 0;
                *families.lock().unwrap_or_else(|e| e.into_inner()).entry(case.family()).or_default() += 1;
                if try_case(&case, &mut rng, ptx, gpu.as_ref(), &exact_gpu).is_err() {
                    let (small, why) = shrink(case, seed, index, ptx, gpu.as_ref());
                    failures.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                        "TLX_RANDOM_SEED={seed} TLX_RANDOM_ONLY={index}: {why}\nshrunk to ({} programs, scalar arguments {:?}):\n{}",
                        small.programs(),
                        small.buffers().1,
                        small.source()
                    ));
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap_or_else(|e| e.into_inner());
    let families = families.into_inner().unwrap_or_else(|e| e.into_inner());
    println!(
        "random kernels: {} cases in {:.1} s ({families:?}): {} failed{}",
        indices.len(),
        started.elapsed().as_secs_f64(),
        failures.len(),
        if on_gpu {
            format!(
                ", {} bit-exact between the GPU and the interpreter",
                exact_gpu.load(Ordering::Relaxed)
            )
        } else {
            String::new()
        }
    );
    assert!(
        failures.is_empty(),
        "{} random kernels failed:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

#[test]
fn random_kernels_are_accepted_and_match_their_reference_on_the_interpreter() {
    run_cases(400, None);
}

/// ≥ 1,000 random kernels on the GPU and the interpreter against the
/// reference (`--include-ignored` where there is a GPU).
#[test]
#[ignore = "needs a GPU"]
fn random_kernels_match_on_the_gpu() {
    let Some(device) = tlx_runtime::testing::gpu_or_skip() else {
        return;
    };
    run_cases(1000, Some(device));
}

/// What an injected bug came to.
enum Caught {
    /// The frontend refused the kernel.
    Frontend,
    /// The protocol checker refused the kernel.
    Refused,
    /// Accepted: a blind spot; says whether the interpreter showed it.
    Accepted(String),
}

/// `case` with `bug` put in, through the frontend and the checker; when
/// they accept it, through the interpreter (default schedule and eight
/// random ones) against the correct kernel's reference.
fn try_bug(case: &Case, bug: &bugs::Bug, rng: &mut Rng) -> Option<Caught> {
    let source = bugs::inject(&case.source(), bug)?;
    let Ok(mut kernels) = tlx_frontend::compile_str(&source) else {
        return Some(Caught::Frontend);
    };
    let kernel = kernels.remove(0);
    if !tlx_core::check::check_protocol(&kernel).errors.is_empty() {
        return Some(Caught::Refused);
    }
    let (buffers, scalars) = case.buffers();
    let before = fill(&buffers, rng);
    let mut shown = Vec::new();
    for schedule in 0..9u64 {
        let ran = run_scheduled(
            &kernel,
            &buffers,
            case.programs(),
            &before,
            &scalars,
            schedule * 7919,
        );
        match ran.and_then(|after| compare(case, &before, &after, 0.0)) {
            Ok(()) => {}
            Err(e) => {
                shown.push(e);
                break;
            }
        }
    }
    Some(Caught::Accepted(match shown.pop() {
        Some(e) => format!("the interpreter shows it: {e}"),
        None => "nor does the interpreter show it in 9 schedules".to_string(),
    }))
}

/// Random TLX kernels, each with one synchronization bug: the checker
/// must refuse them all (`TLX_RANDOM_KERNELS`, `TLX_RANDOM_SEED` as above;
/// 200 by default).
#[test]
fn injected_synchronization_bugs_fail_the_build() {
    let count = env_number("TLX_RANDOM_KERNELS").map_or(200, |n| n as usize);
    let seed = seed();
    let next = AtomicUsize::new(0);
    let refused = AtomicUsize::new(0);
    let by_frontend = AtomicUsize::new(0);
    let escaped = Mutex::new(Vec::new());
    let kinds = Mutex::new(std::collections::BTreeMap::<&str, usize>::new());
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for _ in 0..workers {
            scope.spawn(|| loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= count {
                    break;
                }
                // Draw until a TLX case with a bug that applies comes up.
                let mut rng = Rng(seed ^ (index as u64).wrapping_mul(0xA24B_AED4_963E_E407));
                let (case, bug) = loop {
                    let case = Case::random(&mut rng);
                    let bugs = bugs::applicable(&case);
                    if !bugs.is_empty() {
                        let bug = bugs[rng.below(bugs.len())];
                        break (case, bug);
                    }
                };
                *kinds.lock().unwrap_or_else(|e| e.into_inner()).entry(bug.name).or_default() += 1;
                match try_bug(&case, bug, &mut rng) {
                    Some(Caught::Refused) => {
                        refused.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Caught::Frontend) => {
                        by_frontend.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(Caught::Accepted(shown)) => {
                        let source = bugs::inject(&case.source(), bug).unwrap_or_default();
                        escaped.lock().unwrap_or_else(|e| e.into_inner()).push(format!(
                            "TLX_RANDOM_SEED={seed} index {index}: {} was accepted by the checker; {shown} ({} programs, scalar arguments {:?}):\n{source}",
                            bug.name,
                            case.programs(),
                            case.buffers().1
                        ));
                    }
                    None => panic!("bug `{}` does not apply to its case:\n{}", bug.name, case.source()),
                }
            });
        }
    });
    let escaped = escaped.into_inner().unwrap_or_else(|e| e.into_inner());
    println!(
        "injected bugs: {count} kernels, TLX_RANDOM_SEED={seed}: {} refused by the protocol checker, {} by the frontend, {} accepted; by bug: {:?}",
        refused.load(Ordering::Relaxed),
        by_frontend.load(Ordering::Relaxed),
        escaped.len(),
        kinds.into_inner().unwrap_or_else(|e| e.into_inner())
    );
    assert!(
        escaped.is_empty(),
        "{} injected bugs got through:\n\n{}",
        escaped.len(),
        escaped.join("\n\n")
    );
}

/// The kernel in which the random kernels found ptxas's negation bug
/// (`ptxas_workarounds.rs`): its PTX carries no `neg.s32` for ptxas to fold
/// into a three-input min/max, and still assembles.
#[test]
fn integer_negations_reach_ptxas_as_not_and_add() {
    let source = "#[tlx::kernel(num_warps = 1, configs = [(R = 2, C = 4)])]
fn rk<const R: usize, const C: usize>(a: Ptr<i32>, oi: Ptr<i32>) {
    let offs = arange(0, R)[(.., None)] * C + arange(0, C)[(None, ..)];
    store(oi + arange(0, R), max(-load(a + offs), axis = 1));
}";
    let kernel = tlx_frontend::compile_str(source)
        .expect("the kernel compiles")
        .remove(0);
    let compiled = tlx_codegen::compile(&kernel, Arch::Sm90a).expect("code generation");
    assert!(!compiled.ptx.contains("neg.s32"), "{}", compiled.ptx);
    assert!(compiled.ptx.contains("not.b32"), "{}", compiled.ptx);
    if let Some(ptxas) = ptxas() {
        assemble(&ptxas, Arch::Sm90a, "negation", &compiled.ptx);
    }
}

/// The checker says what it covered (`TLX_DUMP=protocol` writes it): for a
/// warp-specialized ring, several sizes, the explored interleavings of the
/// smallest and one random interleaving at the pivot.
#[test]
fn the_checker_reports_what_its_runs_covered() {
    let mut rng = Rng(7);
    let case = loop {
        let case = Case::random(&mut rng);
        if case.family() == "warp_specialized" {
            break case;
        }
    };
    let kernel = tlx_frontend::compile_str(&case.source())
        .expect("the kernel compiles")
        .remove(0);
    let report = tlx_core::check::check_protocol(&kernel);
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let covered = &report.coverage;
    assert!(
        covered.sizes > 1 && covered.explored > 1 && covered.random_interleavings == 1,
        "{covered:?}"
    );
    assert!(
        covered.runs >= covered.sizes + covered.explored - 1,
        "{covered:?}"
    );
    assert!(covered.to_string().contains("interleavings"));
}
