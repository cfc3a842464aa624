//! `TLX_DUMP` at run time: an already-built binary writes the IR and PTX it
//! embeds for each kernel configuration it launches, the first time it
//! launches it, and says once on stderr where they went. (The build-time
//! dump of the macro also has the LLVM IR and compile timings, but runs only
//! when the kernel is recompiled.)
//!
//! `TLX_DUMP=ir,ptx` (or `all`) selects the stages; `TLX_DUMP_DIR` the
//! folder (default: `tlx-dump` in the system temp folder, as at build time).
//! Files are named as the build-time ones:
//! `<kernel>.<CONST>=<value>....tlxir` and `....<arch>.ptx`.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, OnceLock, PoisonError};

use crate::spec::{ConfigSpec, KernelSpec};

/// The stages and folder `TLX_DUMP` and `TLX_DUMP_DIR` ask for.
pub(crate) struct DumpSettings {
    ir: bool,
    ptx: bool,
    dir: PathBuf,
}

impl DumpSettings {
    /// `None` when `TLX_DUMP` is unset or names no run-time stage.
    fn from_env() -> Option<DumpSettings> {
        let stages = std::env::var("TLX_DUMP").ok()?;
        let dir = std::env::var_os("TLX_DUMP_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("tlx-dump"));
        DumpSettings::parse(&stages, dir)
    }

    fn parse(stages: &str, dir: PathBuf) -> Option<DumpSettings> {
        let wants = |stage: &str| {
            stages
                .split(',')
                .map(|s| s.trim().to_ascii_lowercase())
                .any(|s| s == stage || s == "all")
        };
        let (ir, ptx) = (wants("ir"), wants("ptx"));
        (ir || ptx).then_some(DumpSettings { ir, ptx, dir })
    }
}

/// Configurations already written by this process, by spec address.
static DUMPED: Mutex<Option<HashSet<(usize, usize)>>> = Mutex::new(None);

/// Writes configuration `config` of `spec` if `TLX_DUMP` asks and this
/// process has not yet. Dumping is a debugging aid: failures are reported
/// on stderr, never fatal.
pub(crate) fn on_launch(spec: &'static KernelSpec, config: usize, config_spec: &ConfigSpec) {
    // Read once: launches are a hot path, and the environment does not change.
    static SETTINGS: OnceLock<Option<DumpSettings>> = OnceLock::new();
    let Some(settings) = SETTINGS.get_or_init(DumpSettings::from_env) else {
        return;
    };
    let key = (spec as *const KernelSpec as usize, config);
    let mut dumped = DUMPED.lock().unwrap_or_else(PoisonError::into_inner);
    if !dumped.get_or_insert_with(HashSet::new).insert(key) {
        return;
    }
    drop(dumped);
    match write(settings, spec.name, config_spec) {
        Ok(()) => {
            static SAID: Once = Once::new();
            SAID.call_once(|| {
                eprintln!(
                    "tlx: TLX_DUMP writes each launched kernel's {} to {}",
                    match (settings.ir, settings.ptx) {
                        (true, true) => "IR and PTX",
                        (true, false) => "IR",
                        _ => "PTX",
                    },
                    settings.dir.display()
                )
            });
        }
        Err((path, e)) => eprintln!("tlx: TLX_DUMP could not write {}: {e}", path.display()),
    }
}

/// The files of one configuration.
fn write(
    settings: &DumpSettings,
    kernel: &str,
    config: &ConfigSpec,
) -> Result<(), (PathBuf, std::io::Error)> {
    let mut stem = kernel.to_string();
    for (name, value) in config.consts {
        stem.push_str(&format!(".{name}={value}"));
    }
    let put = |path: PathBuf, text: &str| {
        std::fs::create_dir_all(&settings.dir)
            .and_then(|()| std::fs::write(&path, text))
            .map_err(|e| (path, e))
    };
    let at = |name: String| -> PathBuf { Path::new(&settings.dir).join(name) };
    if settings.ir {
        put(at(format!("{stem}.tlxir")), config.ir)?;
    }
    if settings.ptx {
        for (arch, ptx) in config.ptx {
            put(at(format!("{stem}.{}.ptx", arch.name())), ptx)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tlx_core::ir::Arch;

    #[test]
    fn stages_parse_and_files_are_named_like_the_build_time_ones() {
        assert!(DumpSettings::parse("llvm", PathBuf::new()).is_none());
        let dir = std::env::temp_dir().join(format!("tlx-dump-test-{}", std::process::id()));
        let settings = DumpSettings::parse("IR, ptx", dir.clone()).expect("two stages");
        let config = ConfigSpec {
            consts: &[("BLOCK", 256), ("CAUSAL", 1)],
            num_warps: 4,
            cluster: [1, 1, 1],
            launch_pdl: false,
            shared_bytes: 0,
            global_scratch_bytes: 0,
            ptx: &[(Arch::Sm90a, "// ptx text")],
            ir: "kernel \"k\" {}",
            params: &[],
            bounds: None,
            timeline: None,
        };
        write(&settings, "k", &config).expect("writes");
        let ir = std::fs::read_to_string(dir.join("k.BLOCK=256.CAUSAL=1.tlxir")).expect("ir");
        let ptx =
            std::fs::read_to_string(dir.join("k.BLOCK=256.CAUSAL=1.sm_90a.ptx")).expect("ptx");
        assert_eq!((ir.as_str(), ptx.as_str()), (config.ir, "// ptx text"));
        std::fs::remove_dir_all(&dir).ok();
    }
}
