//! `signal_wait_until`: programs that wait on flags other programs set (a
//! chained sum, each program adding its predecessor's running total, the
//! "decoupled look-back" of stream scans reduced to one link), on the
//! interpreter, which runs the programs of such a kernel in one schedule,
//! and on the GPU where there is one, against a CPU reference in f64. A
//! flag no program sets is a deadlock report naming the wait.

use tlx::prelude::*;

#[path = "common/rng.rs"]
mod rng;

use rng::fresh_rng;

/// `out[p]` = the sum of `x` over programs `0..=p`: program `p` waits for
/// program `p - 1`'s flag, reads its running total, adds its own block's
/// sum, stores the total and releases its own flag.
#[tlx::kernel(arch = "sm_90a", configs = [(BLOCK = 128)])]
fn chained_sums<const BLOCK: usize>(x: Ptr<f32>, totals: Ptr<f32>, flags: Ptr<i32>, out: Ptr<f32>) {
    let pid = program_id(0);
    let mine = sum(load(x + pid * BLOCK + arange(0, BLOCK)));
    let mut before = 0.0;
    if pid > 0 {
        signal_wait_until(flags + (pid - 1), "ge", 1);
        before = load(totals + (pid - 1));
    }
    let total = before + mine;
    store(totals + pid, total);
    atomic_xchg(flags + pid, 1, sem = "release", scope = "sys");
    store(out + pid, total);
}

/// Inside `async_tasks!`: a producer task stores a block and releases a
/// flag; the consumer task waits on it and copies the block out.
#[tlx::kernel(arch = "sm_90a", num_warps = 4, configs = [(BLOCK = 128)])]
fn task_handoff<const BLOCK: usize>(
    x: Ptr<f32>,
    staging: Ptr<f32>,
    flags: Ptr<i32>,
    out: Ptr<f32>,
) {
    let pid = program_id(0);
    let offs = pid * BLOCK + arange(0, BLOCK);
    async_tasks! {
        task(default) {
            signal_wait_until(flags + pid, "eq", 1);
            store(out + offs, load(staging + offs) * 2.0);
        }
        task(num_warps = 4) {
            store(staging + offs, load(x + offs));
            atomic_xchg(flags + pid, 1, sem = "release", scope = "sys");
        }
    }
}

/// Waits for a flag nothing sets (the checker's TLX-W002 says so at build
/// time; opted out, as the test is of what happens at run time).
#[tlx::kernel(arch = "sm_90a", check_protocol = false)]
fn waits_forever(flags: Ptr<i32>, out: Ptr<f32>) {
    signal_wait_until(flags, "eq", 7);
    store(out, 1.0);
}

fn chained_sums_match_the_reference(dev: &Device, programs: usize) {
    const BLOCK: usize = 128;
    let mut rng = fresh_rng();
    let x = rng.vec(BLOCK * programs, 1.0);
    let xb = dev.upload(&x).expect("upload");
    let totals = dev.upload(&vec![f32::NAN; programs]).expect("upload");
    let flags = dev.upload(&vec![0i32; programs]).expect("upload");
    let out = dev.upload(&vec![f32::NAN; programs]).expect("upload");
    chained_sums::<BLOCK>::launch(dev, programs as u32, &xb, &totals, &flags, &out)
        .expect("launch");
    let got = out.download().expect("out");
    let mut running = 0.0f64;
    let mut scale = 0.0f64;
    for (p, &g) in got.iter().enumerate() {
        let block = &x[p * BLOCK..(p + 1) * BLOCK];
        running += block.iter().map(|&v| f64::from(v)).sum::<f64>();
        scale += block.iter().map(|&v| f64::from(v).abs()).sum::<f64>();
        assert!(
            (f64::from(g) - running).abs() <= 1e-5 * scale,
            "program {p}: {g} against {running}"
        );
    }
    assert_eq!(flags.download().expect("flags"), vec![1; programs]);
}

#[test]
fn programs_wait_on_each_others_flags_on_the_interpreter() {
    chained_sums_match_the_reference(&Device::cpu(), 24);
}

fn task_handoff_doubles_every_block(dev: &Device, programs: usize) {
    const BLOCK: usize = 128;
    let mut rng = fresh_rng();
    let x = rng.vec(BLOCK * programs, 1.0);
    let xb = dev.upload(&x).expect("upload");
    let staging = dev
        .upload(&vec![f32::NAN; BLOCK * programs])
        .expect("upload");
    let flags = dev.upload(&vec![0i32; programs]).expect("upload");
    let out = dev
        .upload(&vec![f32::NAN; BLOCK * programs])
        .expect("upload");
    task_handoff::<BLOCK>::launch(dev, programs as u32, &xb, &staging, &flags, &out)
        .expect("launch");
    let got = out.download().expect("out");
    let want: Vec<f32> = x.iter().map(|v| v * 2.0).collect();
    assert_eq!(got, want);
}

#[test]
fn a_task_waits_on_its_sibling_tasks_flag_on_the_interpreter() {
    task_handoff_doubles_every_block(&Device::cpu(), 6);
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn a_task_waits_on_its_sibling_tasks_flag_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    task_handoff_doubles_every_block(&dev, 256);
}

#[test]
fn a_flag_nobody_sets_is_a_deadlock_naming_the_wait() {
    let dev = Device::cpu();
    let flags = dev.upload(&[0i32]).expect("upload");
    let out = dev.upload(&[f32::NAN]).expect("upload");
    let err = waits_forever::launch(&dev, 2u32, &flags, &out).expect_err("deadlocks");
    let text = err.to_string();
    assert!(
        text.contains("signal_wait_until") && text.contains("`eq` 7"),
        "{text}"
    );
}

#[test]
#[ignore = "needs a GPU: run with --include-ignored there (scripts/gpu-suite.sh does)"]
fn programs_wait_on_each_others_flags_on_the_gpu() {
    let Some(dev) = tlx::testing::gpu_or_skip() else {
        return;
    };
    // Fewer programs than SMs: every one is resident, so a wait never
    // holds an SM its predecessor needs.
    chained_sums_match_the_reference(&dev, 64);
}
