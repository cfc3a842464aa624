//! `TLX_TRACE=<file>`: the timelines of this process's interpreted launches
//! (each task of each program, and its waits, on the scheduler's clock), as
//! one Chrome trace JSON file rewritten after every launch, to open in
//! Perfetto or chrome://tracing. On the GPU no timeline is recorded yet:
//! the runtime says so once.

use std::path::PathBuf;
use std::sync::Mutex;

use tlx_core::interp::{chrome_trace, Trace, TraceEvent};

use crate::error::Error;

/// The launches traced so far: each kernel's name and its slices.
static LAUNCHES: Mutex<Vec<(String, Vec<TraceEvent>)>> = Mutex::new(Vec::new());

/// The file `TLX_TRACE` names, if it is set.
pub(crate) fn requested() -> Option<PathBuf> {
    std::env::var_os("TLX_TRACE")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Adds one launch's timelines and rewrites the file with every launch.
pub(crate) fn record(path: &std::path::Path, kernel: &str, trace: &Trace) -> Result<(), Error> {
    let mut launches = LAUNCHES.lock().unwrap_or_else(|p| p.into_inner());
    launches.push((kernel.to_string(), trace.events()));
    std::fs::write(path, chrome_trace(&launches)).map_err(|e| Error::InvalidEnv {
        var: "TLX_TRACE",
        message: format!("cannot write the trace to {}: {e}", path.display()),
    })
}

/// Says once, at the first GPU launch, that with `TLX_TRACE` set it
/// records no timeline (the variable is read that once, off the launch path).
pub(crate) fn note_gpu_launch() {
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        if requested().is_none() {
            return;
        }
        eprintln!(
            "tlx: TLX_TRACE records the timelines of interpreted launches only; \
             GPU launches are not traced yet (run with TLX_INTERPRET=1 for a timeline)"
        );
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_launch_rewrites_the_file_with_every_launch_so_far() {
        let path = std::env::temp_dir().join(format!("tlx-trace-test-{}.json", std::process::id()));
        let trace = Trace::default();
        record(&path, "first", &trace).expect("written");
        record(&path, "second", &trace).expect("written");
        let text = std::fs::read_to_string(&path).expect("read back");
        assert!(
            text.contains("launch 0: first") && text.contains("launch 1: second"),
            "{text}"
        );
        let _ = std::fs::remove_file(&path);
        let unwritable = std::env::temp_dir()
            .join("no-such-dir-for-tlx")
            .join("t.json");
        let err = record(&unwritable, "third", &trace).expect_err("no folder");
        assert!(err.to_string().contains("TLX_TRACE"), "{err}");
    }
}
