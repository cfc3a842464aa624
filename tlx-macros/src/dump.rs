//! `TLX_DUMP`: writes each compiled kernel's IR, LLVM IR and PTX to files
//! so a user can read every stage (rustc hides a proc macro's stderr).
//!
//! `TLX_DUMP=ir,llvm,ptx,notes,protocol` (or `all`) selects the stages (`protocol`:
//! what the barrier checker's runs covered; `notes`: where
//! code generation took a slower path, and how to get the fast one);
//! `TLX_DUMP_DIR` picks the folder (default: `tlx-dump` in the system temp folder). A file
//! `timings.txt` there records how long each kernel took to compile.

use std::io::Write;
use std::path::PathBuf;

pub struct DumpRequest {
    stages: Vec<String>,
    dir: PathBuf,
}

impl DumpRequest {
    /// `None` when `TLX_DUMP` is unset or empty.
    pub fn from_env() -> Option<DumpRequest> {
        let stages: Vec<String> = std::env::var("TLX_DUMP")
            .ok()?
            .split(',')
            .map(|s| s.trim().to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .collect();
        if stages.is_empty() {
            return None;
        }
        let dir = std::env::var_os("TLX_DUMP_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| std::env::temp_dir().join("tlx-dump"));
        Some(DumpRequest { stages, dir })
    }

    pub fn wants(&self, stage: &str) -> bool {
        self.stages.iter().any(|s| s == stage || s == "all")
    }

    /// Writes `<stem>.<ext>` when `stage` was asked for. Dumping is a
    /// debugging aid: a failure to write is reported once on stderr, never fatal.
    pub fn write(&self, stage: &str, stem: &str, ext: &str, text: &str) {
        if !self.wants(stage) {
            return;
        }
        let path = self.dir.join(format!("{stem}.{ext}"));
        let result = std::fs::create_dir_all(&self.dir).and_then(|()| std::fs::write(&path, text));
        if let Err(e) = result {
            eprintln!("tlx: TLX_DUMP could not write {}: {e}", path.display());
        }
    }

    pub fn record_timing(&self, line: &str) {
        let path = self.dir.join("timings.txt");
        let result = std::fs::create_dir_all(&self.dir).and_then(|()| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .and_then(|mut f| writeln!(f, "{line}"))
        });
        if let Err(e) = result {
            eprintln!("tlx: TLX_DUMP could not write {}: {e}", path.display());
        }
    }
}
