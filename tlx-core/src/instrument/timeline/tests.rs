//! Decoding a timeline buffer written as the GPU writes it.

use super::*;

/// A buffer of `programs * warps` tracks of `capacity` record words.
struct Buffer {
    words: Vec<i64>,
    /// Each track's next record word.
    next: Vec<usize>,
    warps: u32,
    capacity: u32,
}

/// Cycles a nanosecond in these tests' SMs.
const RATE: u64 = 2;

impl Buffer {
    fn new(programs: u64, warps: u32, capacity: u32) -> Buffer {
        let tracks = programs as usize * warps as usize;
        Buffer {
            words: vec![0; tracks * (HEADER_WORDS + capacity as usize + TRAILER_WORDS)],
            next: vec![0; tracks],
            warps,
            capacity,
        }
    }

    fn track(&self, program: u64, warp: u32) -> usize {
        (program * u64::from(self.warps) + u64::from(warp)) as usize
    }

    fn base(&self, track: usize) -> usize {
        track * (HEADER_WORDS + self.capacity as usize + TRAILER_WORDS)
    }

    /// The warp starts at `ns` on SM `sm`, whose clock reads `clock0` then.
    fn start(&mut self, program: u64, warp: u32, sm: u64, ns: u64, clock0: u32) {
        let base = self.base(self.track(program, warp));
        self.words[base] = ns as i64;
        self.words[base + 1] = (u64::from(clock0) | sm << 32) as i64;
    }

    /// Appends event `site` at clock `clock` (with the timer `timer`, a
    /// wide event), as the kernel does.
    fn event(&mut self, program: u64, warp: u32, site: u64, clock: u32, timer: Option<u64>) {
        let track = self.track(program, warp);
        let base = self.base(track);
        let at = self.next[track];
        let words = 1 + usize::from(timer.is_some());
        let free = words_left_free(site as usize, timer.is_some());
        if at + words + free > self.capacity as usize {
            self.words[base + HEADER_WORDS + self.capacity as usize] += 1;
            return;
        }
        let record = base + HEADER_WORDS + at;
        let wide = if timer.is_some() { 1 << 63 } else { 0 };
        self.words[record] = (u64::from(clock) | (site + 1) << 32 | wide) as i64;
        if let Some(t) = timer {
            self.words[record + 1] = t as i64;
        }
        self.next[track] += words;
    }
}

/// The clock of an SM whose clock read `clock0` at `1000` ns.
fn clock_at(clock0: u32, ns: u64) -> u32 {
    clock0.wrapping_add((RATE * (ns - 1_000)) as u32)
}

#[test]
fn slices_pair_up_per_track_and_nest() {
    let mut b = Buffer::new(2, 4, 32);
    // Program 1, warp 0 on SM 7: the program (slice 0) holds a task
    // (slice 1) that waits (slice 2) twice; program and task events are
    // wide.
    b.start(1, 0, 7, 1_000, 50);
    for (site, t) in [
        (0, 1_100),
        (2, 1_110),
        (4, 1_120),
        (5, 1_150),
        (4, 1_160),
        (5, 1_170),
        (3, 6_180),
        (1, 6_190),
    ] {
        let wide = site < 4;
        b.event(1, 0, site, clock_at(50, t), wide.then_some(t));
    }
    // Program 0, warp 2 on SM 3: a task alone.
    b.start(0, 2, 3, 1_000, 9);
    b.event(0, 2, 2, clock_at(9, 1_105), Some(1_105));
    b.event(0, 2, 3, clock_at(9, 9_125), Some(9_125));
    let t = decode(&b.words, 2, 4, 32);
    assert_eq!((t.dropped, t.unclosed), (0, 0));
    let got: Vec<_> = t
        .slices
        .iter()
        .map(|s| (s.sm, s.program, s.warp, s.slice, s.start_ns, s.end_ns))
        .collect();
    assert_eq!(
        got,
        [
            (3, 0, 2, 1, 1_105, 9_125),
            (7, 1, 0, 0, 1_100, 6_190),
            (7, 1, 0, 1, 1_110, 6_180),
            (7, 1, 0, 2, 1_120, 1_150),
            (7, 1, 0, 2, 1_160, 1_170),
        ]
    );
}

#[test]
fn events_past_the_capacity_are_counted_and_the_bars_around_them_still_close() {
    // Room for the program's and the task's starts (two words each), one
    // wait's two records, and the ends the last words are kept for.
    let capacity = (2 + 2 + 2 + CLOSING_WORDS) as u32;
    let mut b = Buffer::new(1, 1, capacity);
    b.start(0, 0, 0, 1_000, 0);
    // The program's start, a task's, then two waits of one word a record:
    // the second finds the track full; the task and the program close.
    b.event(0, 0, 0, clock_at(0, 1_010), Some(1_010));
    b.event(0, 0, 2, clock_at(0, 1_015), Some(1_015));
    for (site, t) in [(4, 1_020), (5, 1_030), (4, 1_040), (5, 1_050)] {
        b.event(0, 0, site, clock_at(0, t), None);
    }
    b.event(0, 0, 3, clock_at(0, 9_050), Some(9_050));
    b.event(0, 0, 1, clock_at(0, 9_060), Some(9_060));
    let t = decode(&b.words, 1, 1, capacity);
    assert_eq!(t.dropped, 2);
    assert_eq!(t.unclosed, 0);
    let kept: Vec<_> = t.slices.iter().map(|s| s.slice).collect();
    assert_eq!(kept, [0, 1, 2], "the program, the task and the first wait");
    // Timer readings 10 ns apart fit no line: the SM's clock is taken at
    // its nominal rate, which is near enough over so short a stretch.
    let wait = &t.slices[2];
    assert!(
        wait.start_ns.abs_diff(1_020) <= 5 && (8..=14).contains(&(wait.end_ns - wait.start_ns)),
        "{wait:?}"
    );
}

#[test]
fn only_closing_records_take_the_last_words() {
    assert_eq!(words_left_free(1, true), 0, "the program's end");
    assert_eq!(words_left_free(3, true), 0, "a task's end");
    assert_eq!(
        words_left_free(0, true),
        CLOSING_WORDS,
        "the program's start"
    );
    assert_eq!(words_left_free(5, false), CLOSING_WORDS, "a wait's end");
}

#[test]
fn a_coarse_timer_is_refined_by_the_sm_clock() {
    // The timer ticks in whole microseconds; the clock, 2 cycles a
    // nanosecond, wraps during the run.
    let clock0 = u32::MAX - 5_000;
    let mut b = Buffer::new(1, 1, 256);
    b.start(0, 0, 5, 1_000, clock0);
    let coarse = |ns: u64| ns / 1_000 * 1_000;
    b.event(0, 0, 0, clock_at(clock0, 1_000), Some(1_000));
    for i in 0..20u64 {
        let ns = 1_300 + i * 730;
        b.event(0, 0, 2, clock_at(clock0, ns), None);
        b.event(0, 0, 3, clock_at(clock0, ns + 300), None);
        // A task's events every few waits read the timer again.
        if i % 5 == 4 {
            b.event(0, 0, 4, clock_at(clock0, ns + 400), Some(coarse(ns + 400)));
            b.event(0, 0, 5, clock_at(clock0, ns + 450), Some(coarse(ns + 450)));
        }
    }
    b.event(0, 0, 1, clock_at(clock0, 16_000), Some(16_000));
    let t = decode(&b.words, 1, 1, 256);
    let waits: Vec<&TimedSlice> = t.slices.iter().filter(|s| s.slice == 1).collect();
    assert_eq!(waits.len(), 20);
    for (i, s) in waits.iter().enumerate() {
        // Each wait lasted 300 ns and started 730 ns after the last; the
        // fit keeps durations to 5% and starts to within a tick, where
        // the raw timer says 0 or 1000.
        assert!((285..=315).contains(&(s.end_ns - s.start_ns)), "{s:?}");
        let want = 1_300 + i as u64 * 730;
        assert!(s.start_ns.abs_diff(want) < 600, "{s:?} vs {want}");
    }
}
