//! Timelines as the runtime keeps and writes them.

use tlx_core::instrument::TimedSlice;

use super::*;

fn slice(track: &str, name: &str, kind: SliceKind, start: u64, end: u64) -> Slice {
    Slice {
        track: track.to_string(),
        name: name.to_string(),
        kind,
        program: [1, 0, 0],
        start,
        end,
    }
}

fn launch(kernel: &str, clock: Clock, slices: Vec<Slice>) -> LaunchTimeline {
    LaunchTimeline {
        kernel: kernel.to_string(),
        clock,
        slices,
        dropped: 0,
        unclosed: 0,
    }
}

#[test]
fn the_file_holds_every_launch_with_a_track_per_row() {
    let interpreted = launch(
        "first",
        Clock::TaskSteps,
        vec![
            slice("program (1, 0, 0) task 1", "task 1", SliceKind::Task, 0, 9),
            slice(
                "program (1, 0, 0) task 1",
                "wait: mbarrier 0, phase 1",
                SliceKind::Wait,
                2,
                5,
            ),
        ],
    );
    let gpu = launch(
        "second",
        Clock::Nanoseconds,
        vec![slice(
            "SM   3 · warp  4",
            "task 1",
            SliceKind::Task,
            1_500,
            4_000,
        )],
    );
    let json = chrome_trace(&[interpreted, gpu]);
    for needle in [
        "launch 0: first (interpreter, task steps)",
        "launch 1: second (GPU)",
        "\"cat\":\"wait\"",
        "program (1, 0, 0) task 1",
        // Nanoseconds shown in microseconds.
        "\"ts\":1.5,\"dur\":2.5",
        "\"program\":\"(1, 0, 0)\"",
    ] {
        assert!(json.contains(needle), "no {needle} in {json}");
    }
    assert!(
        json.starts_with('{') && json.trim_end().ends_with("]}"),
        "{json}"
    );
    let path = std::env::temp_dir().join(format!("tlx-trace-test-{}.json", std::process::id()));
    write_file(&path, &[]).expect("written");
    let _ = std::fs::remove_file(&path);
    let unwritable = std::env::temp_dir()
        .join("no-such-dir-for-tlx")
        .join("t.json");
    let err = write_file(&unwritable, &[]).expect_err("no folder");
    assert!(err.to_string().contains("TLX_TRACE"), "{err}");
}

#[test]
fn capture_collects_the_launches_recorded_inside_it_only() {
    let ((), outer) = capture(|| {
        record(launch("a", Clock::TaskSteps, Vec::new())).expect("recorded");
        let ((), inner) = capture(|| {
            record(launch("b", Clock::TaskSteps, Vec::new())).expect("recorded");
        });
        assert_eq!(inner.len(), 1);
        assert_eq!(inner[0].kernel, "b");
    });
    let kernels: Vec<&str> = outer.iter().map(|l| l.kernel.as_str()).collect();
    assert_eq!(kernels, ["a"]);
    assert!(!CAPTURED.with(|c| c.borrow().is_some()));
}

fn timed(slice: usize, program: u64, warp: u32, sm: u32, start_ns: u64, end_ns: u64) -> TimedSlice {
    TimedSlice {
        slice,
        program,
        warp,
        sm,
        start_ns,
        end_ns,
    }
}

#[test]
fn gpu_slices_go_on_sm_and_warp_tracks_with_a_lane_per_resident_program() {
    let specs = [
        TimelineSliceSpec {
            kind: SliceKind::Task,
            label: "task 1",
        },
        TimelineSliceSpec {
            kind: SliceKind::Wait,
            label: "wait: mbarrier (line 9)",
        },
    ];
    let timeline = Timeline {
        slices: vec![
            // Programs 3 and 5 on SM 2 at once; program 6 after program 3.
            timed(0, 3, 4, 2, 1_000, 5_000),
            timed(1, 3, 4, 2, 2_000, 3_000),
            timed(0, 5, 4, 2, 1_200, 6_000),
            timed(0, 6, 4, 2, 5_500, 7_000),
        ],
        dropped: 0,
        unclosed: 0,
    };
    let t = on_tracks("k", [2, 2, 2], &specs, &timeline);
    let got: Vec<(&str, &str, [u32; 3], u64, u64)> = t
        .slices
        .iter()
        .map(|s| (s.track.as_str(), s.name.as_str(), s.program, s.start, s.end))
        .collect();
    assert_eq!(
        got,
        [
            ("SM   2 · warp  4", "task 1", [1, 1, 0], 0, 4_000),
            (
                "SM   2 · warp  4",
                "wait: mbarrier (line 9)",
                [1, 1, 0],
                1_000,
                2_000
            ),
            ("SM   2 · warp  4 · #2", "task 1", [1, 0, 1], 200, 5_000),
            ("SM   2 · warp  4", "task 1", [0, 1, 1], 4_500, 6_000),
        ]
    );
    assert_eq!(t.clock, Clock::Nanoseconds);
}
