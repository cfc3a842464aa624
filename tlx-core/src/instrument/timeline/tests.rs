//! Decoding a timeline buffer written as the GPU writes it.

use super::*;

/// A buffer of `programs * warps` tracks of `capacity` records.
struct Buffer {
    words: Vec<i64>,
    warps: u32,
    capacity: u32,
}

impl Buffer {
    fn new(programs: u64, warps: u32, capacity: u32) -> Buffer {
        let len = programs as usize * warps as usize * (1 + capacity as usize) * RECORD_WORDS;
        Buffer {
            // Poisoned: only what the count covers may be read.
            words: vec![-1; len],
            warps,
            capacity,
        }
        .zeroed_counts(programs)
    }

    fn zeroed_counts(mut self, programs: u64) -> Buffer {
        for track in 0..programs as usize * self.warps as usize {
            let at = self.base(track);
            self.words[at] = 0;
        }
        self
    }

    fn base(&self, track: usize) -> usize {
        track * (1 + self.capacity as usize) * RECORD_WORDS
    }

    /// Appends event `site` to a track as the kernel does.
    fn event(&mut self, program: u64, warp: u32, site: u64, timer: u64, clock: u32, sm: u64) {
        let track = (program * u64::from(self.warps) + u64::from(warp)) as usize;
        let base = self.base(track);
        let n = self.words[base] as usize;
        self.words[base] += 1;
        if n < self.capacity as usize {
            let at = base + (1 + n) * RECORD_WORDS;
            self.words[at] = timer as i64;
            self.words[at + 1] = (u64::from(clock) | site << 32 | sm << 48) as i64;
        }
    }
}

#[test]
fn slices_pair_up_per_track_and_nest() {
    let mut b = Buffer::new(2, 4, 8);
    // Program 1, warp 0 on SM 7: the program (slice 0) holds a task
    // (slice 1) that waits (slice 2) twice.
    for (site, t) in [
        (0, 100),
        (2, 110),
        (4, 120),
        (5, 150),
        (4, 160),
        (5, 170),
        (3, 180),
        (1, 190),
    ] {
        b.event(1, 0, site, t, 0, 7);
    }
    // Program 0, warp 2 on SM 3: a task alone.
    b.event(0, 2, 2, 105, 0, 3);
    b.event(0, 2, 3, 125, 0, 3);
    let t = decode(&b.words, 2, 4, 8);
    assert_eq!((t.dropped, t.unclosed), (0, 0));
    let got: Vec<_> = t
        .slices
        .iter()
        .map(|s| (s.sm, s.program, s.warp, s.slice, s.start_ns, s.end_ns))
        .collect();
    assert_eq!(
        got,
        [
            (3, 0, 2, 1, 105, 125),
            (7, 1, 0, 0, 100, 190),
            (7, 1, 0, 1, 110, 180),
            (7, 1, 0, 2, 120, 150),
            (7, 1, 0, 2, 160, 170),
        ]
    );
}

#[test]
fn events_past_the_capacity_are_counted_and_their_slices_left_out() {
    let mut b = Buffer::new(1, 1, 3);
    for (site, t) in [(0, 10), (2, 20), (3, 30), (2, 40), (3, 50), (1, 60)] {
        b.event(0, 0, site, t, 0, 0);
    }
    let t = decode(&b.words, 1, 1, 3);
    assert_eq!(t.dropped, 3);
    // Kept: the program's start and one wait: the program never closes.
    assert_eq!(t.unclosed, 1);
    assert_eq!(t.slices.len(), 1);
    assert_eq!((t.slices[0].start_ns, t.slices[0].end_ns), (20, 30));
}

#[test]
fn a_coarse_timer_is_refined_by_the_sm_clock() {
    // The timer ticks in whole microseconds; the clock at 2 cycles/ns.
    let mut b = Buffer::new(1, 1, 64);
    let start_clock = u32::MAX - 5_000; // wraps during the run
    for i in 0..20u64 {
        let ns = 1_000 + i * 730;
        let clock = start_clock.wrapping_add((2 * ns) as u32);
        let coarse = ns / 1_000 * 1_000;
        b.event(0, 0, 2 * (i % 2), coarse, clock, 5);
        b.event(
            0,
            0,
            2 * (i % 2) + 1,
            (ns + 300) / 1_000 * 1_000,
            clock.wrapping_add(600),
            5,
        );
    }
    let t = decode(&b.words, 1, 1, 64);
    assert_eq!(t.slices.len(), 20);
    for s in &t.slices {
        // Each slice lasted 300 ns; the fit keeps that to a few ns, where
        // the raw timer says 0 or 1000.
        let dur = s.end_ns - s.start_ns;
        assert!((290..=310).contains(&dur), "{s:?}");
    }
    // Starts are 730 ns apart, within the timer's quantization overall.
    let first = t.slices.iter().map(|s| s.start_ns).min().unwrap_or(0);
    assert!((500..=1_500).contains(&first), "{first}");
}
