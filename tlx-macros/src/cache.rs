//! A content-addressed disk cache of what the macro computes from IR alone
//! (a configuration's protocol report, and its PTX per arch), so that the
//! same kernel built again (by another crate, profile, test binary, by
//! `cargo doc` or clippy) skips the checker and LLVM.
//!
//! An entry's key hashes the compiler's fingerprint (build.rs: the sources
//! of tlx-core and tlx-codegen, the lock file, rustc), what the entry is
//! (the stage, the arch) and the kernel's IR text: a change to any of them
//! is another key, so an entry is never stale. Entries are written to a
//! file of their own and renamed into place, so concurrent builds never
//! read half an entry; one that does not parse is a miss. The folder is
//! `tlx-cache` in the target directory (`TLX_CACHE_DIR` overrides it;
//! `TLX_CACHE=0` turns the cache off).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use tlx_codegen::CompiledKernel;
use tlx_core::check::{Coverage, Finding, ProtocolReport, Rule};
use tlx_core::ir::{Arch, SrcLoc};

pub struct Cache {
    dir: PathBuf,
}

impl Cache {
    /// The cache this build uses, or `None` when it is turned off or the
    /// build has no target directory to keep it in.
    pub fn from_env() -> Option<Cache> {
        if std::env::var("TLX_CACHE").is_ok_and(|v| v == "0") {
            return None;
        }
        let dir = std::env::var_os("TLX_CACHE_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("TLX_TARGET_CACHE")));
        (!dir.as_os_str().is_empty()).then_some(Cache { dir })
    }

    /// The protocol report of the kernel whose IR text is `ir`, if cached.
    pub fn report(&self, ir: &str) -> Option<ProtocolReport> {
        decode_report(&self.load(&key("protocol", None, ir))?)
    }

    pub fn store_report(&self, ir: &str, report: &ProtocolReport) {
        self.store(&key("protocol", None, ir), &encode_report(report));
    }

    /// The kernel whose IR text is `ir` compiled for `arch`, if cached
    /// (without its LLVM IR, which only `TLX_DUMP` reads).
    pub fn compiled(&self, ir: &str, arch: Arch) -> Option<CompiledKernel> {
        decode_compiled(&self.load(&key("ptx", Some(arch), ir))?)
    }

    pub fn store_compiled(&self, ir: &str, arch: Arch, compiled: &CompiledKernel) {
        self.store(&key("ptx", Some(arch), ir), &encode_compiled(compiled));
    }

    fn load(&self, key: &str) -> Option<String> {
        std::fs::read_to_string(self.dir.join(key)).ok()
    }

    /// Writes the entry beside its place, then renames it there. A cache
    /// that cannot be written is only slower: the error is dropped.
    fn store(&self, key: &str, text: &str) {
        let staged = self.dir.join(format!(
            "{key}.{}.{:?}.part",
            std::process::id(),
            std::thread::current().id()
        ));
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|()| std::fs::write(&staged, text))
            .and_then(|()| std::fs::rename(&staged, self.dir.join(key)));
        if written.is_err() {
            let _ = std::fs::remove_file(&staged);
        }
    }
}

/// 128 bits of hash over the fingerprint, the stage, the arch and the IR.
fn key(stage: &str, arch: Option<Arch>, ir: &str) -> String {
    let half = |salt: u8| {
        let mut h = DefaultHasher::new();
        salt.hash(&mut h);
        env!("TLX_COMPILER_FINGERPRINT").hash(&mut h);
        stage.hash(&mut h);
        arch.map(Arch::name).hash(&mut h);
        ir.hash(&mut h);
        h.finish()
    };
    format!("{stage}-{:016x}{:016x}", half(1), half(2))
}

/// Fields as `<byte length>:<text>`, one after another.
fn encode(fields: &[&str]) -> String {
    fields.iter().map(|f| format!("{}:{f}", f.len())).collect()
}

fn decode(mut text: &str) -> Option<Vec<&str>> {
    let mut fields = Vec::new();
    while !text.is_empty() {
        let (len, rest) = text.split_once(':')?;
        let len: usize = len.parse().ok()?;
        fields.push(rest.get(..len)?);
        text = rest.get(len..)?;
    }
    Some(fields)
}

fn encode_report(report: &ProtocolReport) -> String {
    let mut fields = Vec::new();
    for findings in [&report.errors, &report.warnings] {
        fields.push(findings.len().to_string());
        for f in findings {
            fields.extend([
                f.rule.name().to_string(),
                f.at.line.to_string(),
                f.at.col.to_string(),
                f.message.clone(),
                f.hint.clone(),
            ]);
        }
    }
    let c = &report.coverage;
    fields.extend(
        [c.runs, c.random_interleavings, c.sizes, c.explored]
            .map(|n| n.to_string())
            .into_iter()
            .chain([c.trips.to_string(), u8::from(c.explored_all).to_string()]),
    );
    encode(&fields.iter().map(String::as_str).collect::<Vec<_>>())
}

fn decode_report(text: &str) -> Option<ProtocolReport> {
    let fields = decode(text)?;
    let mut fields = fields.into_iter();
    let mut findings = || -> Option<Vec<Finding>> {
        let count: usize = fields.next()?.parse().ok()?;
        (0..count)
            .map(|_| {
                Some(Finding {
                    rule: Rule::from_name(fields.next()?)?,
                    at: SrcLoc {
                        line: fields.next()?.parse().ok()?,
                        col: fields.next()?.parse().ok()?,
                    },
                    message: fields.next()?.to_string(),
                    hint: fields.next()?.to_string(),
                })
            })
            .collect()
    };
    let errors = findings()?;
    let warnings = findings()?;
    let mut number = || fields.next()?.parse::<i64>().ok();
    let coverage = Coverage {
        runs: usize::try_from(number()?).ok()?,
        random_interleavings: usize::try_from(number()?).ok()?,
        sizes: usize::try_from(number()?).ok()?,
        explored: usize::try_from(number()?).ok()?,
        trips: number()?,
        explored_all: number()? == 1,
    };
    Some(ProtocolReport {
        errors,
        warnings,
        coverage,
    })
}

fn encode_compiled(c: &CompiledKernel) -> String {
    let numbers = [c.shared_bytes, c.global_scratch_bytes, c.num_warps].map(|n| n.to_string());
    let mut fields = vec![c.entry.as_str(), c.ptx.as_str()];
    fields.extend(numbers.iter().map(String::as_str));
    fields.extend(c.notes.iter().map(String::as_str));
    encode(&fields)
}

fn decode_compiled(text: &str) -> Option<CompiledKernel> {
    let fields = decode(text)?;
    let [entry, ptx, shared, scratch, warps, notes @ ..] = fields.as_slice() else {
        return None;
    };
    Some(CompiledKernel {
        entry: entry.to_string(),
        ptx: ptx.to_string(),
        llvm_ir: String::new(),
        shared_bytes: shared.parse().ok()?,
        global_scratch_bytes: scratch.parse().ok()?,
        num_warps: warps.parse().ok()?,
        notes: notes.iter().map(|n| n.to_string()).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(rule: Rule, line: u32) -> Finding {
        Finding {
            rule,
            at: SrcLoc { line, col: 7 },
            message: "a message: with 12:colons\nand lines".into(),
            hint: String::new(),
        }
    }

    #[test]
    fn reports_and_kernels_come_back_as_they_went_in() {
        let report = ProtocolReport {
            errors: vec![finding(Rule::Deadlock, 3), finding(Rule::StaleWait, 40)],
            warnings: vec![finding(Rule::Undecidable, 9)],
            coverage: Coverage {
                runs: 40,
                random_interleavings: 1,
                sizes: 12,
                trips: 7,
                explored: 30,
                explored_all: true,
            },
        };
        let back = decode_report(&encode_report(&report));
        assert_eq!(back.as_ref().map(|r| &r.coverage), Some(&report.coverage));
        assert_eq!(back, Some(report));
        let kernel = CompiledKernel {
            entry: "k".into(),
            ptx: "// ptx: 5:\n.entry k {}".into(),
            llvm_ir: String::new(),
            shared_bytes: 1024,
            global_scratch_bytes: 128,
            num_warps: 8,
            notes: vec!["line 4: a note".into(), String::new()],
        };
        assert_eq!(decode_compiled(&encode_compiled(&kernel)), Some(kernel));
    }

    #[test]
    fn damaged_entries_are_misses() {
        let text = encode_report(&ProtocolReport {
            errors: vec![finding(Rule::ArriveCount, 1)],
            warnings: Vec::new(),
            coverage: Coverage::default(),
        });
        assert!(decode_report(&text[..text.len() - 3]).is_none());
        assert!(decode_report("7:unknown").is_none());
        assert!(decode_compiled("1:k").is_none());
    }

    #[test]
    fn keys_differ_by_stage_arch_and_ir() {
        let a = key("ptx", Some(Arch::Sm90a), "kernel a");
        assert_eq!(a, key("ptx", Some(Arch::Sm90a), "kernel a"));
        assert_ne!(a, key("ptx", Some(Arch::Sm100a), "kernel a"));
        assert_ne!(a, key("ptx", Some(Arch::Sm90a), "kernel b"));
        assert_ne!(a, key("protocol", None, "kernel a"));
    }

    #[test]
    fn a_stored_entry_is_read_back_and_a_missing_one_is_a_miss() {
        let dir = std::env::temp_dir().join(format!("tlx-cache-test-{}", std::process::id()));
        let cache = Cache { dir: dir.clone() };
        let report = ProtocolReport {
            errors: Vec::new(),
            warnings: vec![finding(Rule::Undecidable, 2)],
            coverage: Coverage::default(),
        };
        assert!(cache.report("ir").is_none());
        cache.store_report("ir", &report);
        assert_eq!(cache.report("ir"), Some(report));
        assert!(cache.report("other ir").is_none());
        let _ = std::fs::remove_dir_all(dir);
    }
}
