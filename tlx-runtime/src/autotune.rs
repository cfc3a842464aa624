//! The run-time autotuner: among candidates compiled at build time (the
//! configurations of a kernel, or whole alternative kernels), picks the
//! fastest for a problem key, e.g. `(M, N, K, dtype)`, by timing each on the
//! caller's own arguments, and remembers the choice on disk.
//!
//! The cache is one small text file per (binary, device): its name hashes
//! the executable's path, size and modification time and the device's name,
//! so a rebuilt binary or another GPU starts afresh. It lives in
//! `$TLX_CACHE_DIR`, else `$XDG_CACHE_HOME/tlx`, else `~/.cache/tlx`, under
//! `autotune/`. Environment:
//! - `TLX_AUTOTUNE=off`: no timing, the first candidate (the default);
//! - `TLX_AUTOTUNE=retune`: time again, ignoring (and then updating) the cache;
//! - `TLX_AUTOTUNE_FORCE=<label>`: that candidate, by label.
//!
//! Candidates run several times on the caller's buffers, so they must be
//! idempotent (write outputs only from inputs they do not write), as with
//! Triton's autotuner. On the CPU interpreter nothing is timed: timings there
//! say nothing about a GPU, so the first candidate runs.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard, OnceLock, PoisonError};

use crate::{Device, Error};

/// Timed runs per candidate, after one warm-up run.
const RUNS: usize = 3;

/// What the environment asks of the autotuner.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Mode {
    Tune,
    Retune,
    Off,
    Force(String),
}

impl Mode {
    fn from_env() -> Result<Mode, Error> {
        if let Ok(label) = std::env::var("TLX_AUTOTUNE_FORCE") {
            return Ok(Mode::Force(label));
        }
        match std::env::var("TLX_AUTOTUNE").as_deref() {
            Err(_) | Ok("") | Ok("on") => Ok(Mode::Tune),
            Ok("off") => Ok(Mode::Off),
            Ok("retune") => Ok(Mode::Retune),
            Ok(other) => Err(Error::InvalidEnv {
                var: "TLX_AUTOTUNE",
                message: format!("`{other}` is not `on`, `off` or `retune`"),
            }),
        }
    }
}

/// Picks the fastest of `labels` for `key` and runs it (the chosen candidate
/// has run once when this returns); `run(i)` launches candidate `i`.
/// Returns the chosen index. `kernel` and `key` name the entry in the cache.
pub fn autotune(
    device: &Device,
    kernel: &str,
    key: &str,
    labels: &[&str],
    mut run: impl FnMut(usize) -> Result<(), Error>,
) -> Result<usize, Error> {
    if labels.is_empty() {
        return Err(Error::InvalidConfig {
            kernel: "autotune",
            reason: format!("`{kernel}` has no candidates to choose from"),
        });
    }
    let mode = Mode::from_env()?;
    if let Mode::Force(label) = &mode {
        let index = labels
            .iter()
            .position(|l| l == label)
            .ok_or_else(|| Error::InvalidEnv {
                var: "TLX_AUTOTUNE_FORCE",
                message: format!("`{label}` is not one of {labels:?} (kernel `{kernel}`)"),
            })?;
        run(index)?;
        return Ok(index);
    }
    if mode == Mode::Off || !device.is_gpu() || labels.len() == 1 {
        run(0)?;
        return Ok(0);
    }
    let entry = format!("{kernel}|{key}|{}", device.name());
    let remembered = |entries: &HashMap<String, String>| {
        entries
            .get(&entry)
            .and_then(|label| labels.iter().position(|l| l == label))
    };
    if mode == Mode::Tune {
        if let Some(index) = remembered(&chosen()) {
            run(index)?;
            return Ok(index);
        }
    }
    let cache = Cache::for_device(device);
    if mode == Mode::Tune {
        if let Some(index) = cache.as_ref().and_then(|c| c.lookup(&entry, labels)) {
            chosen().insert(entry, labels[index].to_string());
            run(index)?;
            return Ok(index);
        }
    }
    let mut best: Option<(f32, usize)> = None;
    for index in 0..labels.len() {
        run(index)?;
        let mut times = Vec::with_capacity(RUNS);
        for _ in 0..RUNS {
            times.push(device.time(|| run(index))?);
        }
        times.sort_by(f32::total_cmp);
        let median = times[RUNS / 2];
        if best.is_none_or(|(ms, _)| median < ms) {
            best = Some((median, index));
        }
    }
    let index = best.map_or(0, |(_, i)| i);
    chosen().insert(entry.clone(), labels[index].to_string());
    if let Some(cache) = cache {
        // A cache that cannot be written only costs a retune next time.
        let _ = cache.store(&entry, labels[index]);
    }
    run(index)?;
    Ok(index)
}

/// This process's choices, so a tuned call reads no file.
fn chosen() -> MutexGuard<'static, HashMap<String, String>> {
    static CHOSEN: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    CHOSEN
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
}

/// The on-disk choices of this binary on one device.
struct Cache {
    path: PathBuf,
}

impl Cache {
    fn for_device(device: &Device) -> Option<Cache> {
        let dir = cache_dir()?.join("autotune");
        let exe = std::env::current_exe().ok()?;
        let meta = std::fs::metadata(&exe).ok()?;
        let mut h = DefaultHasher::new();
        exe.hash(&mut h);
        meta.len().hash(&mut h);
        meta.modified().ok()?.hash(&mut h);
        device.name().hash(&mut h);
        Some(Cache {
            path: dir.join(format!("{:016x}.txt", h.finish())),
        })
    }

    /// The cached choice for `entry`, if it names one of `labels`.
    fn lookup(&self, entry: &str, labels: &[&str]) -> Option<usize> {
        let text = std::fs::read_to_string(&self.path).ok()?;
        let label = text
            .lines()
            .rev()
            .find_map(|line| line.strip_prefix(entry)?.strip_prefix('\t'))?;
        labels.iter().position(|l| *l == label)
    }

    fn store(&self, entry: &str, label: &str) -> std::io::Result<()> {
        use std::io::Write;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        writeln!(file, "{entry}\t{label}")
    }
}

fn cache_dir() -> Option<PathBuf> {
    let var = |name: &str| {
        std::env::var_os(name)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("TLX_CACHE_DIR")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("tlx")))
        .or_else(|| var("HOME").map(|d| d.join(".cache").join("tlx")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_interpreter_runs_the_first_candidate_without_timing() {
        let device = Device::cpu();
        let mut runs = Vec::new();
        let chosen = autotune(&device, "k", "1x2x3", &["a", "b"], |i| {
            runs.push(i);
            Ok(())
        });
        assert_eq!(chosen.ok(), Some(0));
        assert_eq!(runs, vec![0]);
    }

    #[test]
    fn the_cache_finds_the_latest_choice_by_label() {
        let dir = std::env::temp_dir().join(format!("tlx-autotune-test-{}", std::process::id()));
        let cache = Cache {
            path: dir.join("c.txt"),
        };
        assert_eq!(cache.lookup("k|1", &["a", "b"]), None);
        cache.store("k|1", "b").expect("writable temp dir");
        cache.store("k|2", "a").expect("writable temp dir");
        assert_eq!(cache.lookup("k|1", &["a", "b"]), Some(1));
        cache.store("k|1", "a").expect("writable temp dir");
        assert_eq!(cache.lookup("k|1", &["a", "b"]), Some(0));
        // A label the binary no longer has is not a choice.
        assert_eq!(cache.lookup("k|2", &["x"]), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn no_candidates_is_an_error() {
        let device = Device::cpu();
        assert!(autotune(&device, "k", "key", &[], |_| Ok(())).is_err());
    }
}
