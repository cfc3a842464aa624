//! Deliberately broken kernels, compiled by the real macro and run on the
//! CPU interpreter: each failure is reported with the kernel, the program
//! id, the op and its source line, never a crash or a silent wrong answer.

use tlx::prelude::*;

#[tlx::kernel]
fn reads_past_the_end(x: Ptr<f32>, out: Ptr<f32>) {
    let offs = program_id(0) * 128 + arange(0, 128);
    let v = load(x + offs); // line 10: no mask, and `x` is too short
    store(out + offs, v);
}

#[tlx::kernel]
fn rejects_negatives(x: Ptr<f32>, n: i32) {
    let offs = program_id(0) * 64 + arange(0, 64);
    let mask = offs < n;
    let v = load(x + offs, mask = mask, other = 1.0);
    device_assert(v > 0.0, "inputs must be positive"); // line 19
}

#[tlx::kernel]
fn sums_a_row(x: Ptr<f32>, out: Ptr<f32>) {
    let v = load(x + arange(0, 32)); // line 24
    store(out + program_id(0), sum(v, axis = 0));
}

fn message(result: Result<(), tlx::Error>) -> String {
    match result {
        Ok(()) => panic!("the broken kernel ran without an error"),
        Err(e) => e.to_string(),
    }
}

fn assert_mentions(report: &str, parts: &[&str]) {
    for part in parts {
        assert!(report.contains(part), "report lacks {part:?}:\n{report}");
    }
}

#[test]
fn out_of_bounds_load_names_kernel_program_op_and_line() {
    let dev = Device::cpu();
    // Two programs of 128 elements over a buffer of 200: program 1 overruns.
    let x = dev.upload(&vec![1.0f32; 200]).unwrap();
    let out = dev.upload(&vec![f32::NAN; 256]).unwrap();
    let report = message(reads_past_the_end::launch(&dev, 2u32, &x, &out));
    assert_mentions(
        &report,
        &[
            "reads_past_the_end",
            "program (1, 0, 0)",
            "`load`",
            "line 10",
            "outside `x` (buffer#",
            "800 bytes",
        ],
    );
}

#[test]
fn failed_device_assert_reports_message_and_program() {
    let dev = Device::cpu();
    let mut data = vec![2.0f32; 256];
    data[130] = -3.0; // in program 2 (64 per program)
    let x = dev.upload(&data).unwrap();
    let report = message(rejects_negatives::launch(&dev, 4u32, &x, 256));
    assert_mentions(
        &report,
        &[
            "rejects_negatives",
            "inputs must be positive",
            "program (2, 0, 0)",
            "line 19",
        ],
    );
}

#[test]
fn masked_off_lanes_do_not_trip_the_assert() {
    let dev = Device::cpu();
    let x = dev.upload(&vec![0.5f32; 100]).unwrap();
    // 128 lanes over 100 elements: the masked lanes read `other = 1.0`.
    rejects_negatives::launch(&dev, 2u32, &x, 100).unwrap();
}

/// Runs one test of this binary again in a child process with checked mode
/// on: the check is switched on by an environment variable, which must not
/// leak into the other tests of this binary.
fn in_checked_child(test: &str) -> bool {
    if std::env::var_os("TLX_REPORTS_CHILD").is_some() {
        return true;
    }
    let exe = std::env::current_exe().unwrap();
    let status = std::process::Command::new(exe)
        .args(["--exact", test, "--nocapture"])
        .env("TLX_REPORTS_CHILD", "1")
        .env("TLX_CHECK_UNINIT", "1")
        .env("TLX_INTERPRET", "1")
        .status()
        .unwrap();
    assert!(status.success(), "the checked-mode child of {test} failed");
    false
}

#[test]
fn reading_memory_nobody_wrote_is_reported_in_checked_mode() {
    if !in_checked_child("reading_memory_nobody_wrote_is_reported_in_checked_mode") {
        return;
    }
    let dev = Device::cpu();
    let x = dev.alloc::<f32>(32).unwrap(); // allocated, never written
    let out = dev.upload(&[f32::NAN]).unwrap();
    let report = message(sums_a_row::launch(&dev, 1u32, &x, &out));
    assert_mentions(
        &report,
        &["sums_a_row", "program (0, 0, 0)", "`load`", "line 24"],
    );
    assert!(report.contains("never-written bytes"), "{report}");
}

#[test]
fn downloading_an_output_nobody_wrote_is_reported_in_checked_mode() {
    if !in_checked_child("downloading_an_output_nobody_wrote_is_reported_in_checked_mode") {
        return;
    }
    let dev = Device::cpu();
    let x = dev.upload(&vec![1.0f32; 256]).unwrap();
    let out = dev.alloc::<f32>(256).unwrap();
    // One program of 128 covers only half the output.
    reads_past_the_end::launch(&dev, 1u32, &x, &out).unwrap();
    let report = match out.download() {
        Ok(_) => panic!("the half-written output downloaded without a report"),
        Err(e) => e.to_string(),
    };
    assert_mentions(
        &report,
        &[
            "element 128",
            "256 elements",
            "nothing wrote",
            "last passed to kernel `reads_past_the_end` as `out`",
        ],
    );
}
