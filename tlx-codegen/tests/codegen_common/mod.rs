//! Shared helpers of the code generation tests: a terse kernel builder and a
//! `ptxas` check of the generated PTX for every architecture.
#![allow(dead_code)]

use std::io::Write;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use tlx_codegen::{compile, CompiledKernel};
use tlx_core::ir::*;

pub fn i32t(shape: &[usize]) -> Type {
    Type::tensor(Elem::Scalar(ScalarType::I32), shape.to_vec())
}

pub fn ty(s: ScalarType, shape: &[usize]) -> Type {
    Type::tensor(Elem::Scalar(s), shape.to_vec())
}

pub fn ptrt(s: ScalarType, shape: &[usize]) -> Type {
    Type::tensor(Elem::global_ptr(s), shape.to_vec())
}

/// A kernel builder with one-line helpers for the ops tests use most.
pub struct K {
    pub b: Builder,
}

impl K {
    pub fn new(name: &str, num_warps: u32) -> K {
        K {
            b: Builder::new(
                name,
                KernelOptions {
                    num_warps,
                    ..KernelOptions::default()
                },
            ),
        }
    }
    pub fn ptr(&mut self, name: &str, s: ScalarType) -> ValueId {
        self.b.add_param(name, ParamKind::Ptr(s))
    }
    pub fn scalar_param(&mut self, name: &str, s: ScalarType) -> ValueId {
        self.b.add_param(name, ParamKind::Scalar(s))
    }
    pub fn ty(&self, v: ValueId) -> Type {
        self.b.type_of(v).clone()
    }
    pub fn int(&mut self, v: i64, shape: &[usize]) -> ValueId {
        self.b.push1(OpKind::Constant(Literal::Int(v)), i32t(shape))
    }
    pub fn float(&mut self, v: f64, s: ScalarType, shape: &[usize]) -> ValueId {
        self.b
            .push1(OpKind::Constant(Literal::Float(v)), ty(s, shape))
    }
    pub fn pid(&mut self, axis: u8) -> ValueId {
        self.b.push1(OpKind::ProgramId { axis }, i32t(&[]))
    }
    pub fn arange(&mut self, n: usize) -> ValueId {
        self.b.push1(
            OpKind::Arange {
                start: 0,
                end: n as i64,
            },
            i32t(&[n]),
        )
    }
    pub fn splat(&mut self, v: ValueId, shape: &[usize]) -> ValueId {
        let t = self.ty(v).with_shape(shape.to_vec());
        self.b.push1(OpKind::Splat(v), t)
    }
    pub fn bin(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        let t = self.ty(lhs);
        self.b.push1(OpKind::Binary { op, lhs, rhs }, t)
    }
    pub fn un(&mut self, op: UnaryOp, value: ValueId) -> ValueId {
        let t = self.ty(value);
        self.b.push1(OpKind::Unary { op, value }, t)
    }
    pub fn cmp(&mut self, pred: CmpPred, lhs: ValueId, rhs: ValueId) -> ValueId {
        let t = self.ty(lhs).with_elem(Elem::Scalar(ScalarType::Bool));
        self.b.push1(OpKind::Compare { pred, lhs, rhs }, t)
    }
    pub fn cast(&mut self, v: ValueId, s: ScalarType) -> ValueId {
        let t = self.ty(v).with_elem(Elem::Scalar(s));
        self.b.push1(OpKind::Cast(v), t)
    }
    pub fn expand(&mut self, value: ValueId, axis: usize) -> ValueId {
        let mut shape = self.ty(value).shape().to_vec();
        shape.insert(axis, 1);
        let t = self.ty(value).with_shape(shape);
        self.b.push1(OpKind::ExpandDims { value, axis }, t)
    }
    pub fn broadcast(&mut self, v: ValueId, shape: &[usize]) -> ValueId {
        let t = self.ty(v).with_shape(shape.to_vec());
        self.b.push1(OpKind::Broadcast(v), t)
    }
    /// `ptr + offset`, splatting a scalar pointer to the offset's shape.
    pub fn add_ptr(&mut self, ptr: ValueId, offset: ValueId) -> ValueId {
        let shape = self.ty(offset).shape().to_vec();
        let ptr = if self.ty(ptr).shape() != shape {
            self.splat(ptr, &shape)
        } else {
            ptr
        };
        let t = self.ty(ptr);
        self.b.push1(OpKind::AddPtr { ptr, offset }, t)
    }
    pub fn load(&mut self, ptr: ValueId, mask: Option<ValueId>, other: Option<ValueId>) -> ValueId {
        let pt = self.ty(ptr);
        let t = pt.with_elem(Elem::Scalar(pt.elem().pointee().unwrap()));
        self.b.push1(
            OpKind::Load {
                ptr,
                mask,
                other,
                cache: CacheModifier::None,
                eviction: EvictionPolicy::Normal,
                volatile: false,
            },
            t,
        )
    }
    pub fn store(&mut self, ptr: ValueId, value: ValueId, mask: Option<ValueId>) {
        self.b.push(
            OpKind::Store {
                ptr,
                value,
                mask,
                cache: CacheModifier::None,
                eviction: EvictionPolicy::Normal,
            },
            vec![],
        );
    }
    pub fn reduce(&mut self, value: ValueId, axis: usize, kind: ReduceKind) -> ValueId {
        let t = self.ty(value);
        let mut shape = t.shape().to_vec();
        shape.remove(axis);
        let elem = match kind {
            ReduceKind::Argmax | ReduceKind::Argmin => Elem::Scalar(ScalarType::I32),
            _ => t.elem(),
        };
        self.b.push1(
            OpKind::Reduce { value, axis, kind },
            Type::tensor(elem, shape),
        )
    }
    pub fn finish(self) -> Kernel {
        self.b.finish()
    }
}

/// `ptxas`, from `TLX_PTXAS` or the PATH.
pub fn ptxas() -> Option<String> {
    if let Ok(p) = std::env::var("TLX_PTXAS") {
        return Some(p);
    }
    Command::new("ptxas")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|_| "ptxas".to_string())
}

/// Compile for every architecture, and assemble each PTX with `ptxas` when present.
pub fn compile_all(kernel: &Kernel) -> Vec<CompiledKernel> {
    let ptxas = ptxas();
    if ptxas.is_none() {
        println!("skipped: ptxas not found");
    }
    Arch::ALL
        .into_iter()
        .map(|arch| {
            let c = compile(kernel, arch)
                .unwrap_or_else(|e| panic!("{} for {}: {e}", kernel.name, arch.name()));
            assert!(c.ptx.contains(&format!(".target {}", arch.name())));
            assert!(c.ptx.contains(&format!(".entry {}", kernel.name)));
            if let Some(p) = &ptxas {
                assemble(p, arch, &kernel.name, &c.ptx);
            }
            c
        })
        .collect()
}

/// Assembles `ptx` for `arch`; panics with ptxas's words if it refuses.
pub fn assemble(ptxas: &str, arch: Arch, name: &str, ptx: &str) {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(
        "tlx_codegen_{}_{unique}_{name}_{}",
        std::process::id(),
        arch.name()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("k.ptx");
    std::fs::File::create(&src)
        .unwrap()
        .write_all(ptx.as_bytes())
        .unwrap();
    let out = Command::new(ptxas)
        .arg(format!("-arch={}", arch.name()))
        .arg(&src)
        .arg("-o")
        .arg(dir.join("k.cubin"))
        .output()
        .expect("running ptxas");
    assert!(
        out.status.success(),
        "ptxas rejected {name} for {}:\n{}\n{ptx}",
        arch.name(),
        String::from_utf8_lossy(&out.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `ptxas_verbose` with the `ptxas` found, which must accept `ptx`; says
/// it skipped when there is none.
pub fn ptxas_verbose_if_found(ptx: &str) {
    match ptxas() {
        Some(ptxas) => {
            ptxas_verbose(&ptxas, ptx);
        }
        None => println!("skipped: ptxas not found"),
    }
}

/// What `ptxas -v` says about an sm_90a PTX module: registers, spills and
/// any warnings (for example a serialized wgmma pipeline).
pub fn ptxas_verbose(ptxas: &str, ptx: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let unique = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("tlx_ptxas_v_{}_{unique}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("k.ptx");
    std::fs::write(&src, ptx).unwrap();
    let out = Command::new(ptxas)
        .args(["-arch=sm_90a", "-v"])
        .arg(&src)
        .arg("-o")
        .arg(dir.join("k.cubin"))
        .output()
        .expect("running ptxas");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}
