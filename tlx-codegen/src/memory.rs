//! Global loads and stores. Registers whose pointers the axis analysis
//! proves contiguous form vectors of up to 16 bytes. Whether every vector's
//! first address is aligned (a `row * stride` offset is unknown until run
//! time) and every vector's mask uniform is tested once per tile and thread;
//! one branch then runs all vector accesses, back to back, or a fallback
//! that decides chunk by chunk between a vector and per-element predicated
//! accesses (in small blocks, which keeps the rarely taken path from setting
//! the kernel's register count). Masks that are monotone along a
//! contiguous run (`cols < n`) are tested at each vector's ends only.
//! Masked-off lanes keep `other` and touch no memory.

use super::analysis::axis::{self, MaskRun};
use super::emit::scalar_type;
use super::error::{malformed, Result};
use super::lower::{Lowerer, Tensor};
use super::scalar::{from_bits, mem_bytes, to_bits};
use crate::layout::LinearLayout;
use tlx_core::ir::{CacheModifier, Elem, EvictionPolicy, Op, OpKind, ScalarType, ValueId};

/// How one memory word travels: PTX type, asm constraint, LLVM type.
fn word_kind(bytes: usize) -> (&'static str, &'static str, &'static str) {
    match bytes {
        1 => ("u8", "h", "i16"),
        2 => ("b16", "h", "i16"),
        8 => ("b64", "l", "i64"),
        _ => ("b32", "r", "i32"),
    }
}

/// Registers per vector access: leading register bases that walk the last dim
/// element by element, capped by the pointer contiguity and 16 bytes.
pub(super) fn vector_len(layout: &LinearLayout, contiguity: usize, elem_bytes: usize) -> usize {
    let mut n = 1usize;
    for (i, &b) in layout.regs.iter().enumerate() {
        if b != 1 << i {
            break;
        }
        n *= 2;
    }
    let mut n = n.min(contiguity).min((16 / elem_bytes).max(1)).max(1);
    // Every group must start at a multiple of its length: no other basis may touch
    // the bits that index inside a group.
    let lead = n.trailing_zeros() as usize;
    let others = layout
        .regs
        .iter()
        .skip(lead)
        .chain(&layout.lanes)
        .chain(&layout.warps);
    let min_other = others
        .filter(|&&b| b != 0)
        .map(|&b| 1usize << b.trailing_zeros())
        .min();
    if let Some(step) = min_other {
        n = n.min(step);
    }
    n
}

/// A global access instruction: its opcode with qualifiers, and the L2
/// eviction priority it asks for through a cache policy, if any.
pub(super) struct MemInstr {
    op: String,
    l2_priority: Option<&'static str>,
}

impl MemInstr {
    /// One predicated access: `access` spells it around the opcode it is
    /// given, without its `;`; with an L2 priority it is wrapped in the scope
    /// that creates the policy.
    fn asm(&self, access: impl FnOnce(&str) -> String) -> String {
        match self.l2_priority {
            None => format!("{};", access(&self.op)),
            // The policy lives in a scoped register, so each access carries its
            // own; ptxas folds the repeated createpolicy.
            Some(priority) => format!(
                "{{\\0A\\09.reg .b64 %l2p;\\0A\\09createpolicy.fractional.L2::{priority}.b64 %l2p, 1.0;\\0A\\09{}, %l2p;\\0A\\09}}",
                access(&format!("{}.L2::cache_hint", self.op))
            ),
        }
    }
}

pub(super) fn load_qualifiers(
    cache: CacheModifier,
    eviction: EvictionPolicy,
    volatile: bool,
) -> MemInstr {
    if volatile {
        return MemInstr {
            op: "ld.volatile.global".into(),
            l2_priority: None,
        };
    }
    let cop = match cache {
        CacheModifier::Ca => ".ca",
        CacheModifier::Cg => ".cg",
        CacheModifier::Cs => ".cs",
        _ => "",
    };
    MemInstr {
        op: format!(
            "ld.global{cop}{}",
            eviction_qualifier(cop.is_empty(), eviction)
        ),
        l2_priority: l2_priority(eviction),
    }
}

fn store_qualifiers(cache: CacheModifier, eviction: EvictionPolicy) -> MemInstr {
    let cop = match cache {
        CacheModifier::Cg => ".cg",
        CacheModifier::Cs => ".cs",
        CacheModifier::Wb => ".wb",
        CacheModifier::Wt => ".wt",
        _ => "",
    };
    MemInstr {
        op: format!(
            "st.global{cop}{}",
            eviction_qualifier(cop.is_empty(), eviction)
        ),
        l2_priority: l2_priority(eviction),
    }
}

/// PTX takes a cache operator or an L1 eviction priority, so the hint yields to `.cop`.
fn eviction_qualifier(allowed: bool, eviction: EvictionPolicy) -> &'static str {
    match (allowed, eviction) {
        (true, EvictionPolicy::EvictFirst) => ".L1::evict_first",
        (true, EvictionPolicy::EvictLast) => ".L1::evict_last",
        _ => "",
    }
}

/// The L2 keeps what the program will read again: the hint also goes to L2,
/// through a cache policy, where a `.cop` does not take it away.
fn l2_priority(eviction: EvictionPolicy) -> Option<&'static str> {
    match eviction {
        EvictionPolicy::EvictFirst => Some("evict_first"),
        EvictionPolicy::EvictLast => Some("evict_last"),
        _ => None,
    }
}

/// The LLVM integer type of a memory word of `bytes`.
pub(super) fn word_type(bytes: usize) -> &'static str {
    word_kind(bytes).2
}

/// Splits `n` elements of `elem_bytes` into memory words: (word bytes, words).
pub(super) fn words_of(n: usize, elem_bytes: usize) -> (usize, usize) {
    let total = n * elem_bytes;
    let word = if elem_bytes >= 8 { 8 } else { total.min(4) };
    (word, total / word)
}

/// Bytes of the run along the last dimension that one warp's access at
/// one register index covers: the register bits that make up a vector,
/// then the lane bits that continue it.
fn sector_run_bytes(layout: &LinearLayout, elem_bytes: usize) -> usize {
    let mut run = 1u32;
    for basis in &layout.regs {
        if *basis != run {
            break;
        }
        run <<= 1;
    }
    while layout.lanes.contains(&run) {
        run <<= 1;
    }
    let last = layout.shape.last().copied().unwrap_or(1) as u32;
    run.min(last) as usize * elem_bytes
}

impl<'k> Lowerer<'k> {
    /// Pack element bit patterns (ints of `elem_bytes`) into words.
    pub(super) fn pack(&mut self, bits: &[String], elem_bytes: usize, word: usize) -> Vec<String> {
        let (_, _, wty) = word_kind(word);
        let ety = word_kind(elem_bytes).2;
        let ety = if elem_bytes == 1 { "i8" } else { ety };
        let per_word = word / elem_bytes;
        bits.chunks(per_word)
            .map(|chunk| {
                if per_word == 1 {
                    return if elem_bytes == 1 {
                        self.f.inst(format!("zext i8 {} to i16", chunk[0]))
                    } else {
                        chunk[0].clone()
                    };
                }
                self.vector_word(chunk, ety, wty)
            })
            .collect()
    }

    /// One word from a vector of its elements: NVPTX packs that with register
    /// moves, where shifts and ors cost three instructions an element.
    fn vector_word(&mut self, elems: &[String], ety: &str, wty: &str) -> String {
        let vty = format!("<{} x {ety}>", elems.len());
        let mut acc = "poison".to_string();
        for (i, e) in elems.iter().enumerate() {
            acc = self
                .f
                .inst(format!("insertelement {vty} {acc}, {ety} {e}, i32 {i}"));
        }
        if vty == wty {
            return acc;
        }
        self.f.inst(format!("bitcast {vty} {acc} to {wty}"))
    }

    /// The f32 registers that store value `v` is rounded from, in `layout`, when
    /// `v` is a cast of f32 to a half-precision float.
    fn narrowed_from_f32(
        &mut self,
        v: ValueId,
        layout: &LinearLayout,
    ) -> Result<Option<Vec<String>>> {
        let Some(OpKind::Cast(src)) = self.def_of(v).map(|op| &op.kind) else {
            return Ok(None);
        };
        let half = matches!(
            self.ty(v).elem(),
            Elem::Scalar(ScalarType::F16 | ScalarType::BF16)
        );
        if !half || self.ty(*src).elem() != Elem::Scalar(ScalarType::F32) {
            return Ok(None);
        }
        // Only when the f32 registers are at hand: moving them too would cost more.
        if !self.is_recomputable(*src) && self.layout_of(*src)? != *layout {
            return Ok(None);
        }
        Ok(Some(self.get(*src, layout)?))
    }

    /// Pack element values into words of `word` bytes. Half-precision floats rounded
    /// from f32 (`wide`) are rounded here a word at a time, which PTX does in one
    /// `cvt.rn.bf16x2.f32` (or `f16x2`) per pair.
    fn pack_values(
        &mut self,
        values: &[String],
        wide: Option<&[String]>,
        elem: Elem,
        word: usize,
    ) -> Vec<String> {
        let bytes = mem_bytes(elem);
        let per_word = word / bytes;
        match (elem, wide) {
            (Elem::Scalar(s), Some(wide)) if per_word > 1 => {
                let wty = word_kind(word).2;
                let ety = scalar_type(s);
                wide.chunks(per_word)
                    .map(|chunk| {
                        let k = chunk.len();
                        let v = self.vector_word(chunk, "float", &format!("<{k} x float>"));
                        let r = self
                            .f
                            .inst(format!("fptrunc <{k} x float> {v} to <{k} x {ety}>"));
                        self.f.inst(format!("bitcast <{k} x {ety}> {r} to {wty}"))
                    })
                    .collect()
            }
            _ => {
                let bits: Vec<String> = values
                    .iter()
                    .map(|v| to_bits(&mut self.f, elem, v))
                    .collect();
                self.pack(&bits, bytes, word)
            }
        }
    }

    /// Inverse of [`Lowerer::pack`].
    pub(super) fn unpack(
        &mut self,
        words: &[String],
        elem_bytes: usize,
        word: usize,
    ) -> Vec<String> {
        let (_, _, wty) = word_kind(word);
        let ety = if elem_bytes == 1 {
            "i8"
        } else {
            word_kind(elem_bytes).2
        };
        let per_word = word / elem_bytes;
        let mut out = Vec::new();
        for w in words {
            for i in 0..per_word {
                let shifted = if i == 0 {
                    w.clone()
                } else {
                    self.f
                        .inst(format!("lshr {wty} {w}, {}", i * elem_bytes * 8))
                };
                out.push(if ety == wty {
                    shifted
                } else {
                    self.f.inst(format!("trunc {wty} {shifted} to {ety}"))
                });
            }
        }
        out
    }

    /// Predicated load of `words` words at `addr`; inactive words keep `init`.
    pub(super) fn load_words(
        &mut self,
        instr: &MemInstr,
        addr: &str,
        pred: &str,
        init: &[String],
        word: usize,
    ) -> Vec<String> {
        let (ptx, con, lty) = word_kind(word);
        let n = init.len();
        let outs: Vec<String> = (0..n).map(|i| format!("${i}")).collect();
        let mut asm = String::new();
        let mov = if word == 1 { "b16" } else { ptx };
        for i in 0..n {
            asm.push_str(&format!("mov.{mov} ${i}, ${};\\0A\\09", n + i));
        }
        let vec = if n == 1 {
            String::new()
        } else {
            format!(".v{n}")
        };
        let dst = if n == 1 {
            outs[0].clone()
        } else {
            format!("{{{}}}", outs.join(", "))
        };
        asm.push_str(
            &instr.asm(|op| format!("@${} {op}{vec}.{ptx} {dst}, [${}]", 2 * n + 1, 2 * n)),
        );
        let constraints: Vec<String> = (0..n)
            .map(|_| format!("={con}"))
            .chain((0..n).map(|_| con.to_string()))
            .chain(["l".to_string(), "b".to_string()])
            .collect();
        let mut args: Vec<(&str, &str)> = init.iter().map(|v| (lty, v.as_str())).collect();
        args.push(("ptr addrspace(1)", addr));
        args.push(("i1", pred));
        let ret = if n == 1 {
            lty.to_string()
        } else {
            format!("{{ {} }}", vec![lty; n].join(", "))
        };
        let r = self.f.asm(&ret, &asm, &constraints.join(","), &args);
        if n == 1 {
            return vec![r];
        }
        (0..n)
            .map(|i| self.f.inst(format!("extractvalue {ret} {r}, {i}")))
            .collect()
    }

    fn store_words(
        &mut self,
        instr: &MemInstr,
        addr: &str,
        pred: &str,
        words: &[String],
        word: usize,
    ) {
        let (ptx, con, lty) = word_kind(word);
        let n = words.len();
        let srcs: Vec<String> = (1..=n).map(|i| format!("${i}")).collect();
        let vec = if n == 1 {
            String::new()
        } else {
            format!(".v{n}")
        };
        let src = if n == 1 {
            srcs[0].clone()
        } else {
            format!("{{{}}}", srcs.join(", "))
        };
        let ptx = if word == 1 { "u8" } else { ptx };
        let asm = instr.asm(|op| format!("@${} {op}{vec}.{ptx} [$0], {src}", n + 1));
        let constraints: Vec<String> = ["l".to_string()]
            .into_iter()
            .chain((0..n).map(|_| con.to_string()))
            .chain(["b".to_string()])
            .collect();
        let mut args: Vec<(&str, &str)> = vec![("ptr addrspace(1)", addr)];
        args.extend(words.iter().map(|w| (lty, w.as_str())));
        args.push(("i1", pred));
        self.f.asm("void", &asm, &constraints.join(","), &args);
    }

    /// The power of two, in bytes, that the axis analysis proves divides the
    /// start of every chunk of the pointer tile `ptr`.
    pub(super) fn known_alignment(&self, ptr: ValueId) -> usize {
        self.facts.axis.get(&ptr).map_or(1, |a| a.divisibility)
    }

    /// i1: every `n`-register chunk of the tile may be one vector access: its first
    /// address is aligned to the vector and its mask is uniform. One test for the
    /// whole tile keeps the vector accesses together in one branch-free block.
    /// `known_alignment` (bytes) spares the address test when it covers the vector.
    pub(super) fn tile_vector_ok(
        &mut self,
        addrs: &[String],
        masks: Option<(&[String], MaskRun)>,
        n: usize,
        bytes: usize,
        known_alignment: usize,
    ) -> String {
        let aligned = if known_alignment % (n * bytes) == 0 {
            "true".to_string()
        } else {
            self.addresses_aligned(addrs, n, bytes)
        };
        let Some((m, run)) = masks else {
            return aligned;
        };
        // Lanes whose mask differs from the chunk's first one.
        let others: Vec<usize> = match run {
            MaskRun::Uniform => return aligned,
            MaskRun::Monotone { .. } => vec![n - 1],
            MaskRun::General => (1..n).collect(),
        };
        let mut mixed = "false".to_string();
        for chunk in m.chunks(n) {
            for &i in &others {
                let differs = self.f.inst(format!("xor i1 {}, {}", chunk[0], chunk[i]));
                mixed = self.f.inst(format!("or i1 {mixed}, {differs}"));
            }
        }
        let uniform = self.f.inst(format!("xor i1 {mixed}, true"));
        self.f.inst(format!("and i1 {aligned}, {uniform}"))
    }

    /// i1: the start of every `n`-element chunk is aligned to `n * bytes`.
    fn addresses_aligned(&mut self, addrs: &[String], n: usize, bytes: usize) -> String {
        // Alignment needs only the low address bits: OR them over the chunk starts.
        let mut low = "0".to_string();
        for addr in addrs.iter().step_by(n) {
            let int = self
                .f
                .inst(format!("ptrtoint ptr addrspace(1) {addr} to i64"));
            let int = self.f.inst(format!("trunc i64 {int} to i32"));
            low = self.f.inst(format!("or i32 {low}, {int}"));
        }
        let low = self.f.inst(format!("and i32 {low}, {}", n * bytes - 1));
        self.f.inst(format!("icmp eq i32 {low}, 0"))
    }

    /// The mask registers of an access and how they run over `n`-element groups.
    pub(super) fn access_masks(
        &mut self,
        mask: Option<tlx_core::ir::ValueId>,
        layout: &LinearLayout,
        n: usize,
    ) -> Result<Option<(Vec<String>, MaskRun)>> {
        let Some(m) = mask else {
            return Ok(None);
        };
        let regs = self.get(m, layout)?;
        let run = if self.ty(m).is_scalar() {
            MaskRun::Uniform
        } else {
            let def = |v| self.def_of(v).map(|op| &op.kind);
            axis::mask_run(self.kernel, &self.facts.axis, &def, m, n)
        };
        Ok(Some((regs, run)))
    }

    /// Branch on `ok` to two fresh blocks; returns (vector, scalar, join) labels
    /// and leaves the vector block open.
    fn open_vector_branch(&mut self, ok: &str) -> (String, String, String) {
        let vector = self.f.fresh("vec_access");
        let scalar = self.f.fresh("scalar_access");
        let join = self.f.fresh("access_end");
        self.f
            .stmt(format!("br i1 {ok}, label %{vector}, label %{scalar}"));
        self.f.start_block(&vector);
        (vector, scalar, join)
    }

    pub(super) fn enter_block(&mut self, label: &str) {
        self.f.start_block(label);
        self.current_block = label.to_string();
    }

    pub fn lower_load(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::Load {
            ptr,
            mask,
            other,
            cache,
            eviction,
            volatile,
        } = &op.kind
        else {
            return Err(malformed("not a load"));
        };
        let result = *op
            .results
            .first()
            .ok_or_else(|| malformed("load without result"))?;
        if let Some(ring) = self.ring_reads.remove(&result) {
            return self.read_ring(op, ring);
        }
        let elem = self.ty(result).elem();
        self.note_load(result, op);
        let ptrs = match self.load_hint(result) {
            Some(hint) => Tensor {
                regs: self.get(*ptr, &hint)?,
                layout: hint,
            },
            None => self.tensor(*ptr)?,
        };
        let layout = ptrs.layout.clone();
        let bytes = mem_bytes(elem);
        let contiguity = self.facts.axis.get(ptr).map_or(1, |a| a.contiguity);
        let n = vector_len(&layout, contiguity, bytes);
        let masks = self.access_masks(*mask, &layout, n)?;
        let others = other.map(|o| self.get(o, &layout)).transpose()?;
        let instr = load_qualifiers(*cache, *eviction, *volatile);
        let init_bits: Vec<String> = match &others {
            Some(o) => o.iter().map(|v| to_bits(&mut self.f, elem, v)).collect(),
            None => vec!["0".into(); layout.num_regs()],
        };
        let pred_of = |reg: usize| {
            masks
                .as_ref()
                .map_or("true".to_string(), |(m, _)| m[reg].clone())
        };
        let (word, _) = words_of(1, bytes);
        let mut scalar_bits = Vec::with_capacity(layout.num_regs());
        let scalar_inits = self.pack(&init_bits, bytes, word);
        let scalar_loads = |l: &mut Self, out: &mut Vec<String>| {
            for (reg, init) in scalar_inits.iter().enumerate() {
                let w = l.load_words(
                    &instr,
                    &ptrs.regs[reg],
                    &pred_of(reg),
                    std::slice::from_ref(init),
                    word,
                );
                out.extend(l.unpack(&w, bytes, word));
            }
        };
        if n == 1 {
            scalar_loads(self, &mut scalar_bits);
            let regs = scalar_bits
                .iter()
                .map(|b| from_bits(&mut self.f, elem, b))
                .collect();
            self.held.values.insert(result, Tensor { layout, regs });
            return Ok(());
        }
        let (vword, _) = words_of(n, bytes);
        let vec_inits: Vec<Vec<String>> = init_bits
            .chunks(n)
            .map(|chunk| self.pack(chunk, bytes, vword))
            .collect();
        let align = self.known_alignment(*ptr);
        let ok = self.tile_vector_ok(
            &ptrs.regs,
            masks.as_ref().map(|(m, run)| (m.as_slice(), *run)),
            n,
            bytes,
            align,
        );
        let (vector, fallback, join) = self.open_vector_branch(&ok);
        let mut vector_words = Vec::new();
        for (c, inits) in vec_inits.iter().enumerate() {
            let start = c * n;
            let w = self.load_words(&instr, &ptrs.regs[start], &pred_of(start), inits, vword);
            vector_words.extend(w);
        }
        self.f.stmt(format!("br label %{join}"));
        // The fallback decides chunk by chunk, in blocks of their own: a whole tile
        // of scalar loads in one block would set the register count of the kernel.
        self.f.start_block(&fallback);
        let mut fallback_words = Vec::new();
        let mut last = fallback;
        for (c, inits) in vec_inits.iter().enumerate() {
            let range = c * n..(c + 1) * n;
            let chunk_masks = masks.as_ref().map(|(m, run)| (&m[range.clone()], *run));
            let ok = self.tile_vector_ok(&ptrs.regs[range.clone()], chunk_masks, n, bytes, align);
            let (chunk_vector, chunk_scalar, chunk_join) = self.open_vector_branch(&ok);
            let vw = self.load_words(
                &instr,
                &ptrs.regs[range.start],
                &pred_of(range.start),
                inits,
                vword,
            );
            self.f.stmt(format!("br label %{chunk_join}"));
            self.f.start_block(&chunk_scalar);
            let mut bits = Vec::with_capacity(n);
            for reg in range {
                let w = self.load_words(
                    &instr,
                    &ptrs.regs[reg],
                    &pred_of(reg),
                    std::slice::from_ref(&scalar_inits[reg]),
                    word,
                );
                bits.extend(self.unpack(&w, bytes, word));
            }
            let sw = self.pack(&bits, bytes, vword);
            self.f.stmt(format!("br label %{chunk_join}"));
            self.f.start_block(&chunk_join);
            let wty = word_kind(vword).2;
            for (v, s) in vw.iter().zip(&sw) {
                fallback_words.push(self.f.inst(format!(
                    "phi {wty} [ {v}, %{chunk_vector} ], [ {s}, %{chunk_scalar} ]"
                )));
            }
            last = chunk_join;
        }
        self.f.stmt(format!("br label %{join}"));
        self.enter_block(&join);
        let wty = word_kind(vword).2;
        // All phis first: LLVM wants them grouped at the top of the block.
        let joined: Vec<String> = vector_words
            .iter()
            .zip(&fallback_words)
            .map(|(v, s)| {
                self.f
                    .inst(format!("phi {wty} [ {v}, %{vector} ], [ {s}, %{last} ]"))
            })
            .collect();
        let bits = self.unpack(&joined, bytes, vword);
        let regs = bits
            .iter()
            .map(|b| from_bits(&mut self.f, elem, b))
            .collect();
        self.held.values.insert(result, Tensor { layout, regs });
        Ok(())
    }

    pub fn lower_store(&mut self, op: &'k Op) -> Result<()> {
        let OpKind::Store {
            ptr,
            value,
            mask,
            cache,
            eviction,
        } = &op.kind
        else {
            return Err(malformed("not a store"));
        };
        let elem = self.ty(*value).elem();
        // Addresses that are cheap to redo follow the value's layout rather than
        // moving the value through shared memory (a dot accumulator, say).
        let cheap = |v: &tlx_core::ir::ValueId| self.is_recomputable(*v);
        let layout = if cheap(ptr) && mask.as_ref().is_none_or(cheap) && !cheap(value) {
            let held = self.layout_of(*value)?;
            let natural = self.layout_of(*ptr)?;
            let bytes = mem_bytes(elem);
            // A warp of the held layout (an MMA fragment of 16-bit values,
            // say) would fill only part of each 32-byte sector it writes:
            // one conversion through shared memory costs less than that.
            let narrow = |l: &LinearLayout| sector_run_bytes(l, bytes) < 32;
            if narrow(&held) && !narrow(&natural) && held.numel() * bytes >= 4096 {
                natural
            } else {
                held
            }
        } else {
            self.layout_of(*ptr)?
        };
        let ptrs = self.get(*ptr, &layout)?;
        let values = self.get(*value, &layout)?;
        let bytes = mem_bytes(elem);
        let contiguity = self.facts.axis.get(ptr).map_or(1, |a| a.contiguity);
        let n = vector_len(&layout, contiguity, bytes);
        let masks = self.access_masks(*mask, &layout, n)?;
        let instr = store_qualifiers(*cache, *eviction);
        let (word, _) = words_of(1, bytes);
        let pred_of = |reg: usize| {
            masks
                .as_ref()
                .map_or("true".to_string(), |(m, _)| m[reg].clone())
        };
        let scalar_stores = |l: &mut Self, bits: &[String]| {
            for (reg, b) in bits.iter().enumerate() {
                let w = l.pack(std::slice::from_ref(b), bytes, word);
                l.store_words(&instr, &ptrs[reg], &pred_of(reg), &w, word);
            }
        };
        if n == 1 {
            let bits: Vec<String> = values
                .iter()
                .map(|v| to_bits(&mut self.f, elem, v))
                .collect();
            scalar_stores(self, &bits);
            return Ok(());
        }
        let align = self.known_alignment(*ptr);
        let ok = self.tile_vector_ok(
            &ptrs,
            masks.as_ref().map(|(m, run)| (m.as_slice(), *run)),
            n,
            bytes,
            align,
        );
        let (vword, _) = words_of(n, bytes);
        let wide = self.narrowed_from_f32(*value, &layout)?;
        let vwords: Vec<Vec<String>> = (0..values.len())
            .step_by(n)
            .map(|start| {
                let range = start..start + n;
                let wide = wide.as_ref().map(|w| &w[range.clone()]);
                self.pack_values(&values[range], wide, elem, vword)
            })
            .collect();
        let (_, fallback, join) = self.open_vector_branch(&ok);
        for (c, w) in vwords.iter().enumerate() {
            let start = c * n;
            self.store_words(&instr, &ptrs[start], &pred_of(start), w, vword);
        }
        self.f.stmt(format!("br label %{join}"));
        // Chunk by chunk, in blocks of their own (see `lower_load`).
        self.f.start_block(&fallback);
        for (c, w) in vwords.iter().enumerate() {
            let range = c * n..(c + 1) * n;
            let chunk_masks = masks.as_ref().map(|(m, run)| (&m[range.clone()], *run));
            let ok = self.tile_vector_ok(&ptrs[range.clone()], chunk_masks, n, bytes, align);
            let (_, chunk_scalar, chunk_join) = self.open_vector_branch(&ok);
            self.store_words(&instr, &ptrs[range.start], &pred_of(range.start), w, vword);
            self.f.stmt(format!("br label %{chunk_join}"));
            self.f.start_block(&chunk_scalar);
            // The elements come back out of the packed words, so that every value
            // has the one use a fused pair conversion needs.
            let bits = self.unpack(w, bytes, vword);
            for (reg, b) in range.zip(&bits) {
                let sw = self.pack(std::slice::from_ref(b), bytes, word);
                self.store_words(&instr, &ptrs[reg], &pred_of(reg), &sw, word);
            }
            self.f.stmt(format!("br label %{chunk_join}"));
            self.f.start_block(&chunk_join);
        }
        self.f.stmt(format!("br label %{join}"));
        self.enter_block(&join);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_length_follows_layout_contiguity_and_16_bytes() {
        let l = LinearLayout::blocked(&[1024], 4, 4).unwrap();
        assert_eq!(vector_len(&l, 1024, 4), 4);
        assert_eq!(vector_len(&l, 2, 4), 2);
        assert_eq!(vector_len(&l, 1024, 8), 2);
        let l8 = LinearLayout::blocked(&[1024], 8, 4).unwrap();
        assert_eq!(vector_len(&l8, 1024, 2), 8);
        assert_eq!(vector_len(&l8, 1024, 4), 4);
    }

    #[test]
    fn vectors_never_straddle_other_owners() {
        // A lane owning element 1 would split a pair: no vector.
        let odd = LinearLayout {
            shape: vec![64],
            regs: vec![1, 2],
            lanes: vec![1, 4, 8, 16, 32],
            warps: vec![],
        };
        assert_eq!(vector_len(&odd, 64, 4), 1);
        let mma = crate::layout::mma_sync_accumulator(16, 8, 1).unwrap();
        assert_eq!(vector_len(&mma, 8, 4), 2);
    }

    #[test]
    fn words_split_chunks() {
        assert_eq!(words_of(8, 2), (4, 4));
        assert_eq!(words_of(2, 8), (8, 2));
        assert_eq!(words_of(2, 1), (2, 1));
        assert_eq!(words_of(1, 1), (1, 1));
    }

    /// `y[i] = bf16(f32(x[i]) * 2)` for `i < n`, over one block of 1024.
    fn bf16_scale_kernel() -> tlx_core::ir::Kernel {
        use tlx_core::ir::{BinaryOp, Builder, CmpPred, KernelOptions, Literal, ParamKind, Type};
        let mut b = Builder::new("scale", KernelOptions::default());
        let x = b.add_param("x", ParamKind::Ptr(ScalarType::BF16));
        let y = b.add_param("y", ParamKind::Ptr(ScalarType::BF16));
        let n = b.add_param("n", ParamKind::Scalar(ScalarType::I32));
        let tensor = |e: Elem| Type::tensor(e, vec![1024]);
        let idx = tensor(Elem::Scalar(ScalarType::I32));
        let cols = b.push1(
            OpKind::Arange {
                start: 0,
                end: 1024,
            },
            idx.clone(),
        );
        let ns = b.push1(OpKind::Splat(n), idx);
        let mask = b.push1(
            OpKind::Compare {
                pred: CmpPred::Lt,
                lhs: cols,
                rhs: ns,
            },
            tensor(Elem::Scalar(ScalarType::Bool)),
        );
        let pointers = |p: ValueId, b: &mut Builder| {
            let ptys = tensor(Elem::global_ptr(ScalarType::BF16));
            let ps = b.push1(OpKind::Splat(p), ptys.clone());
            b.push1(
                OpKind::AddPtr {
                    ptr: ps,
                    offset: cols,
                },
                ptys,
            )
        };
        let (px, py) = (pointers(x, &mut b), pointers(y, &mut b));
        let bf = tensor(Elem::Scalar(ScalarType::BF16));
        let f32s = tensor(Elem::Scalar(ScalarType::F32));
        let v = b.push1(
            OpKind::Load {
                ptr: px,
                mask: Some(mask),
                other: None,
                cache: CacheModifier::default(),
                eviction: EvictionPolicy::default(),
                volatile: false,
            },
            bf.clone(),
        );
        let wide = b.push1(OpKind::Cast(v), f32s.clone());
        let two = b.push1(OpKind::Constant(Literal::Float(2.0)), f32s.clone());
        let op = BinaryOp::Mul;
        let scaled = b.push1(
            OpKind::Binary {
                op,
                lhs: wide,
                rhs: two,
            },
            f32s,
        );
        let narrow = b.push1(OpKind::Cast(scaled), bf);
        b.push(
            OpKind::Store {
                ptr: py,
                value: narrow,
                mask: Some(mask),
                cache: CacheModifier::default(),
                eviction: EvictionPolicy::default(),
            },
            vec![],
        );
        b.finish()
    }

    #[test]
    fn masked_tile_accesses_branch_once_to_an_all_vector_block() {
        let text =
            super::super::lower::lower_kernel(&bf16_scale_kernel(), tlx_core::ir::Arch::Sm90a)
                .unwrap()
                .module_text;
        // 1024 elements over 4 warps: 8 bf16 per thread, one 16-byte chunk. Per
        // access (a load and a store): the tile test and branch, then the
        // fallback's test and branch for that chunk.
        assert_eq!(text.matches("label %vec_access").count(), 2 * 2, "{text}");
        assert_eq!(
            text.matches("label %scalar_access").count(),
            2 * 2,
            "{text}"
        );
        // The mask is monotone: each test compares the chunk's first and last
        // element only (one xor) and negates the result (one more).
        assert_eq!(text.matches("xor i1").count(), 2 * 2 * 2, "{text}");
        // The store rounds f32 pairs into packed words.
        assert_eq!(text.matches("fptrunc <2 x float>").count(), 4, "{text}");
    }
}
