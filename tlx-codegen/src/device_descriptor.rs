//! Tensor descriptors built on the device (`make_tensor_descriptor`): the
//! 128-byte TMA descriptor is assembled in shared memory (zeroed, then each
//! field set with `tensormap.replace`), copied to this program's slot of a
//! global scratch buffer with the release fence TMA's descriptor proxy
//! needs, and acquired there; its value is that slot's generic address, as
//! a descriptor parameter's is the parameter's.
//!
//! TMA reads descriptors only from global, constant or parameter memory, so
//! a kernel that makes any gets one more parameter, after all others: a
//! scratch buffer of [`DESCRIPTOR_BYTES`] per `make_tensor_descriptor` per
//! program, which the runtime supplies (see `global_scratch_bytes`). A
//! descriptor made in a loop is rebuilt in the same slot each iteration.

use super::analysis::storage::DESCRIPTOR_BYTES;
use super::error::{malformed, Result};
use super::lower::Lowerer;
use tlx_core::ir::{ScalarType, Swizzle, TensorDescriptorType, TmaBox, ValueId};

/// PTX's `.elemtype` code for a tensor of `elem` (TMA only moves bytes, so
/// types without a name travel as unsigned integers of their size).
fn elem_code(elem: ScalarType) -> Result<u32> {
    Ok(match elem {
        ScalarType::I8 | ScalarType::U8 | ScalarType::F8E4M3 | ScalarType::F8E5M2 => 0,
        ScalarType::U32 => 2,
        ScalarType::I32 => 3,
        ScalarType::I64 => 5,
        ScalarType::F16 => 6,
        ScalarType::F32 => 7,
        ScalarType::F64 => 9,
        ScalarType::BF16 => 10,
        ScalarType::Bool => return Err(malformed("a tensor descriptor of bool")),
    })
}

/// PTX's `.swizzle_mode` code.
fn swizzle_code(swizzle: Swizzle) -> u32 {
    match swizzle {
        Swizzle::None => 0,
        Swizzle::Bytes32 => 1,
        Swizzle::Bytes64 => 2,
        Swizzle::Bytes128 => 3,
    }
}

impl<'k> Lowerer<'k> {
    /// `make_tensor_descriptor(base, dims..., outer strides...)` into
    /// `result`: its program's scratch slot, filled and acquired by the
    /// first warp of the context, then every thread of the context may use
    /// it (the context's barrier ends the op).
    pub(super) fn lower_make_descriptor(
        &mut self,
        base: ValueId,
        dims: &[ValueId],
        result: ValueId,
    ) -> Result<()> {
        let desc: &TensorDescriptorType = self.descriptor_type(result)?;
        let (elem, block) = (desc.elem(), desc.block_shape());
        let rank = block.len();
        if dims.len() != 2 * rank - 1 {
            return Err(malformed("make_tensor_descriptor operand count"));
        }
        let slot = self
            .facts
            .descriptor_slots
            .get(&result)
            .copied()
            .ok_or_else(|| malformed("a descriptor without a scratch slot"))?;
        let (global, generic) = self.descriptor_slot_address(slot)?;

        // The staging copy: 128 bytes on a 128-byte boundary of the scratch.
        let start = self.scratch(0);
        let at = start.div_ceil(DESCRIPTOR_BYTES) * DESCRIPTOR_BYTES;
        self.use_shared(at + DESCRIPTOR_BYTES - start);
        self.shared.shared_align = self.shared.shared_align.max(DESCRIPTOR_BYTES);
        // Earlier readers of the scratch are done before it is written.
        self.barrier();
        let staged = self.shared_address(&at.to_string());

        let base_reg = self.register(base)?;
        let base_address = self
            .f
            .inst(format!("ptrtoint ptr addrspace(1) {base_reg} to i64"));
        // Innermost first, as the descriptor numbers dimensions.
        let sizes: Vec<String> = dims[..rank]
            .iter()
            .rev()
            .map(|d| self.register(*d))
            .collect::<Result<_>>()?;
        let strides: Vec<String> = dims[rank..]
            .iter()
            .rev()
            .map(|d| self.register(*d))
            .collect::<Result<_>>()?;
        let elem_bytes = elem.size_bytes();
        let stride_bytes: Vec<String> = strides
            .iter()
            .map(|s| self.f.inst(format!("mul i64 {s}, {elem_bytes}")))
            .collect();
        let size_words: Vec<String> = sizes
            .iter()
            .map(|s| self.f.inst(format!("trunc i64 {s} to i32")))
            .collect();
        let tma = TmaBox::new(elem, block);
        let elem_code = elem_code(elem)?;

        let lane_in_first_warp = {
            let tid = self.thread_id();
            self.f.inst(format!("icmp ult i32 {tid}, 32"))
        };
        // Every field not replaced below must read zero.
        self.when(&lane_in_first_warp, |l| {
            let lane = l.thread_id();
            let word = l.f.inst(format!("shl i32 {lane}, 2"));
            let at = l.f.inst(format!("add i32 {staged}, {word}"));
            l.f.asm(
                "void",
                "st.shared.b32 [$0], 0;",
                "r,~{memory}",
                &[("i32", &at)],
            );
            l.f.asm("void", "bar.warp.sync -1;", "~{memory}", &[]);
        });
        let field = |name: &str| format!("tensormap.replace.tile.{name}.shared::cta.b1024");
        self.on_first_thread("true", |l| {
            let address = format!("{}.b64 [$0], $1;", field("global_address"));
            l.f.asm(
                "void",
                &address,
                "r,l,~{memory}",
                &[("i32", &staged), ("i64", &base_address)],
            );
            let set = |l: &mut Self, text: String| {
                l.f.asm("void", &text, "r,~{memory}", &[("i32", &staged)]);
            };
            set(l, format!("{}.b32 [$0], {};", field("rank"), rank - 1));
            for (ord, size) in tma.box_shape.iter().rev().enumerate() {
                set(l, format!("{}.b32 [$0], {ord}, {size};", field("box_dim")));
                set(
                    l,
                    format!("{}.b32 [$0], {ord}, 1;", field("element_stride")),
                );
            }
            // Fields from registers: dimension `ord`'s size (b32) or stride (b64).
            let set_from = |l: &mut Self, name: &str, ord: usize, (ty, value): (&str, &str)| {
                let (bits, constraint) = if ty == "i64" { (64, "l") } else { (32, "r") };
                let text = format!("{}.b{bits} [$0], {ord}, $1;", field(name));
                let constraints = format!("r,{constraint},~{{memory}}");
                l.f.asm(
                    "void",
                    &text,
                    &constraints,
                    &[("i32", &staged), (ty, value)],
                );
            };
            for (ord, size) in size_words.iter().enumerate() {
                set_from(l, "global_dim", ord, ("i32", size));
            }
            for (ord, bytes) in stride_bytes.iter().enumerate() {
                set_from(l, "global_stride", ord, ("i64", bytes));
            }
            set(l, format!("{}.b32 [$0], {elem_code};", field("elemtype")));
            set(l, format!("{}.b32 [$0], 0;", field("interleave_layout")));
            let swizzle = swizzle_code(tma.swizzle);
            set(l, format!("{}.b32 [$0], {swizzle};", field("swizzle_mode")));
            // Out-of-bounds elements read as zero.
            set(l, format!("{}.b32 [$0], 0;", field("fill_mode")));
        });
        // The copy out and the acquire are warp-collective; the barrier
        // then hands the descriptor to the context's other warps.
        self.when(&lane_in_first_warp, |l| {
            l.f.asm("void", "bar.warp.sync -1;", "~{memory}", &[]);
            l.f.asm(
                "void",
                "tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [$0], [$1], 128;",
                "l,r,~{memory}",
                &[("i64", &global), ("i32", &staged)],
            );
            l.f.asm(
                "void",
                "fence.proxy.tensormap::generic.acquire.gpu [$0], 128;",
                "l,~{memory}",
                &[("i64", &generic)],
            );
        });
        self.barrier();
        self.define_register(result, generic)
    }

    /// The global and generic addresses (i64) of scratch slot `slot` of
    /// this program: programs are numbered x fastest, as the grid is.
    fn descriptor_slot_address(&mut self, slot: usize) -> Result<(String, String)> {
        let scratch = self
            .shared
            .descriptor_scratch
            .clone()
            .ok_or_else(|| malformed("a device descriptor without the scratch parameter"))?;
        let program = self.program_index(false);
        let per_program = self.facts.descriptor_slots.len() * DESCRIPTOR_BYTES;
        let first = self.f.inst(format!("mul i64 {program}, {per_program}"));
        let offset = self
            .f
            .inst(format!("add i64 {first}, {}", slot * DESCRIPTOR_BYTES));
        let ptr = self.f.inst(format!(
            "getelementptr i8, ptr addrspace(1) {scratch}, i64 {offset}"
        ));
        let global = self
            .f
            .inst(format!("ptrtoint ptr addrspace(1) {ptr} to i64"));
        let cast = self
            .f
            .inst(format!("addrspacecast ptr addrspace(1) {ptr} to ptr"));
        let generic = self.f.inst(format!("ptrtoint ptr {cast} to i64"));
        Ok((global, generic))
    }

    /// This program's index in the grid (an i64), x fastest as the grid
    /// numbers programs; emitted where the code is, or (`in_entry`) in the
    /// entry block, where every later block sees it.
    pub(super) fn program_index(&mut self, in_entry: bool) -> String {
        let emit = |l: &mut Self, rhs: String| {
            if in_entry {
                l.f.prologue_inst(rhs)
            } else {
                l.f.inst(rhs)
            }
        };
        let sreg = |l: &mut Self, name: &str| {
            let intrinsic = format!("llvm.nvvm.read.ptx.sreg.{name}");
            let r = if in_entry {
                l.f.prologue_call("i32", &intrinsic, &[])
            } else {
                l.f.call("i32", &intrinsic, &[])
            };
            emit(l, format!("zext i32 {r} to i64"))
        };
        let (x, y, z) = (
            sreg(self, "ctaid.x"),
            sreg(self, "ctaid.y"),
            sreg(self, "ctaid.z"),
        );
        let (nx, ny) = (sreg(self, "nctaid.x"), sreg(self, "nctaid.y"));
        let zy = emit(self, format!("mul i64 {z}, {ny}"));
        let row = emit(self, format!("add i64 {zy}, {y}"));
        let rows = emit(self, format!("mul i64 {row}, {nx}"));
        emit(self, format!("add i64 {rows}, {x}"))
    }
}
