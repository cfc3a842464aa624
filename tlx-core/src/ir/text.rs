//! The IR's text form: [`print`] writes a [`Kernel`] as readable,
//! line-oriented text (one op a line, nested blocks indented, source lines
//! as trailing comments) and [`parse`] reads it back exactly.
//!
//! The text is what `TLX_DUMP=ir` shows and what the proc macro embeds in a
//! binary for the CPU interpreter, so `parse(&print(k)) == k` holds for
//! every kernel the builder can make. A sketch of the format:
//!
//! ```text
//! kernel "add" {
//!   source "src/main.rs"
//!   options num_warps 4 num_stages 3 cluster 2 1 1 maxnreg 128
//!   const "BLOCK" 1024
//!   param "x" %0 ptr<f32>
//!   %3 = program_id 0 : i32  // line 12:5
//!   %9 = for %4 to %5 step %6 iter(%7) : f32 {
//!     ^(%10: i32, %11: f32)
//!     yield %11
//!   }
//!   async_tasks {  // line 20:5
//!     task default num_regs 232 {
//!       %12 = async_task_replica_id : i32
//!     }
//!     task num_warps 2 num_regs 24 replicate 2 {
//!     }
//!   }
//! }
//! ```
//!
//! Op names are the op table's mnemonics (`ir::OpCode`). Values that no
//! param, op or block arg defines (the builder can make them) are listed as
//! `value %N : type` so that the type table survives; besides tensors
//! (`tensor<64x32xptr<f16>>`, `ptr<f16, shared>`) types are written
//! `smem<64x32xbf16, buffers 3, swizzle 128b, mutable>` (with `, transposed`
//! and `, remote` where they hold), `barriers<4>` (`barriers<1, remote>`),
//! `tensordesc<128x64xf16>` and `token`. Op ids are not written: the parser
//! numbers ops in pre-order, as `Builder::finish` does.

use std::collections::{HashMap, HashSet};
use std::fmt::{self, Write as _};

use super::def::OpCode;
use super::kernel::{DescriptorBlock, Kernel, KernelOptions, Param, ParamKind};
use super::ops::*;
use super::tasks::TaskRegion;
use super::types::{
    AddressSpace, BarrierType, Elem, ScalarType, SharedMemoryType, Swizzle, TensorDescriptorType,
    TensorMemoryType, Type,
};

/// Why a text could not be read as a kernel; `line` is 1-based.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("IR text, line {line}: {message}")]
pub struct ParseError {
    pub line: usize,
    pub message: String,
}

/// Nested blocks deeper than this are rejected instead of risking the stack.
const MAX_BLOCK_DEPTH: usize = 200;

const CMP_PREDS: [(CmpPred, &str); 6] = [
    (CmpPred::Eq, "eq"),
    (CmpPred::Ne, "ne"),
    (CmpPred::Lt, "lt"),
    (CmpPred::Le, "le"),
    (CmpPred::Gt, "gt"),
    (CmpPred::Ge, "ge"),
];

/// The combines a scan takes, by their binary ops' mnemonics.
const SCAN_COMBINES: [(BinaryOp, &str); 4] = [
    (BinaryOp::Add, "add"),
    (BinaryOp::Mul, "mul"),
    (BinaryOp::Max, "max"),
    (BinaryOp::Min, "min"),
];

const REDUCE_KINDS: [(ReduceKind, &str); 5] = [
    (ReduceKind::Sum, "sum"),
    (ReduceKind::Max, "max"),
    (ReduceKind::Min, "min"),
    (ReduceKind::Argmax, "argmax"),
    (ReduceKind::Argmin, "argmin"),
];

const CACHE_MODIFIERS: [(CacheModifier, &str); 6] = [
    (CacheModifier::None, "none"),
    (CacheModifier::Ca, "ca"),
    (CacheModifier::Cg, "cg"),
    (CacheModifier::Cs, "cs"),
    (CacheModifier::Wb, "wb"),
    (CacheModifier::Wt, "wt"),
];

const EVICTION_POLICIES: [(EvictionPolicy, &str); 3] = [
    (EvictionPolicy::Normal, "normal"),
    (EvictionPolicy::EvictFirst, "evict_first"),
    (EvictionPolicy::EvictLast, "evict_last"),
];

const ATOMIC_OPS: [(AtomicOp, &str); 7] = [
    (AtomicOp::Add, "add"),
    (AtomicOp::Max, "max"),
    (AtomicOp::Min, "min"),
    (AtomicOp::And, "and"),
    (AtomicOp::Or, "or"),
    (AtomicOp::Xor, "xor"),
    (AtomicOp::Exchange, "exchange"),
];

const MEM_SEMS: [(MemSem, &str); 4] = [
    (MemSem::Relaxed, "relaxed"),
    (MemSem::Acquire, "acquire"),
    (MemSem::Release, "release"),
    (MemSem::AcqRel, "acq_rel"),
];

const MEM_SCOPES: [(MemScope, &str); 3] = [
    (MemScope::Cta, "cta"),
    (MemScope::Gpu, "gpu"),
    (MemScope::System, "system"),
];

const DOT_PRECISIONS: [(DotPrecision, &str); 2] =
    [(DotPrecision::Tf32, "tf32"), (DotPrecision::Ieee, "ieee")];

fn name_of<T: PartialEq + Copy>(table: &[(T, &'static str)], item: T) -> &'static str {
    table
        .iter()
        .find(|(t, _)| *t == item)
        .map_or("?", |(_, name)| name)
}

fn item_of<T: Copy>(table: &[(T, &'static str)], name: &str) -> Option<T> {
    table.iter().find(|(_, n)| *n == name).map(|(t, _)| *t)
}

// ---------------------------------------------------------------- printing

/// The kernel as text; [`parse`] reads it back.
pub fn print(kernel: &Kernel) -> String {
    let mut printer = Printer {
        out: String::new(),
        kernel,
    };
    printer.kernel();
    printer.out
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print(self))
    }
}

struct Printer<'k> {
    out: String,
    kernel: &'k Kernel,
}

impl Printer<'_> {
    fn kernel(&mut self) {
        let k = self.kernel;
        self.out += &format!("kernel {} {{\n", quote(&k.name));
        self.out += &format!("  source {}\n", quote(&k.source_file));
        self.out += &format!(
            "  options num_warps {} num_stages {}",
            k.options.num_warps, k.options.num_stages
        );
        if k.options.cluster != [1, 1, 1] {
            let [x, y, z] = k.options.cluster;
            self.out += &format!(" cluster {x} {y} {z}");
        }
        if let Some(n) = k.options.maxnreg {
            self.out += &format!(" maxnreg {n}");
        }
        if let Some(ns) = k.options.mbar_timeout_ns {
            self.out += &format!(" mbar_timeout_ns {ns}");
        }
        if k.options.launch_pdl {
            self.out += " launch_pdl";
        }
        self.out += "\n";
        for (name, value) in &k.consts {
            self.out += &format!("  const {} {value}\n", quote(name));
        }
        for p in &k.params {
            let kind = p.kind.value_type();
            self.out += &format!("  param {} {} {kind}\n", quote(&p.name), p.value);
        }
        let defined = defined_values(k);
        for (index, ty) in k.types.iter().enumerate() {
            if !defined.contains(&(index as u32)) {
                self.out += &format!("  value %{index} : {ty}\n");
            }
        }
        self.block_ops(&k.body, 1);
        self.out += "}\n";
    }

    fn block_ops(&mut self, block: &Block, depth: usize) {
        for op in &block.ops {
            self.op(op, depth);
        }
    }

    fn nested_block(&mut self, block: &Block, depth: usize) {
        if !block.args.is_empty() {
            let args: Vec<String> = block
                .args
                .iter()
                .map(|a| format!("{a}: {}", self.type_text(*a)))
                .collect();
            self.indent(depth);
            self.out += &format!("^({})\n", args.join(", "));
        }
        self.block_ops(block, depth);
    }

    fn indent(&mut self, depth: usize) {
        for _ in 0..depth {
            self.out += "  ";
        }
    }

    fn type_text(&self, v: ValueId) -> String {
        self.kernel
            .types
            .get(v.index())
            .map_or_else(|| "<no type>".to_string(), Type::to_string)
    }

    fn op(&mut self, op: &Op, depth: usize) {
        self.indent(depth);
        if !op.results.is_empty() {
            self.out += &values(&op.results);
            self.out += " = ";
        }
        self.out += &op_head(&op.kind);
        if !op.results.is_empty() {
            let types: Vec<String> = op.results.iter().map(|r| self.type_text(*r)).collect();
            self.out += " : ";
            self.out += &types.join(", ");
        }
        if let OpKind::AsyncTasks { tasks } = &op.kind {
            self.tasks(tasks, op.loc, depth);
            return;
        }
        let blocks: Vec<(&str, &Block)> = match &op.kind {
            OpKind::For { body, .. } => vec![("", body)],
            OpKind::While { cond, body, .. } => vec![("", cond), ("do", body)],
            OpKind::If {
                then_block,
                else_block,
                ..
            } => vec![("", then_block), ("else", else_block)],
            _ => vec![],
        };
        for (i, (keyword, block)) in blocks.iter().enumerate() {
            if i == 0 {
                self.out += " {";
                self.loc_comment(op.loc);
            } else {
                self.indent(depth);
                self.out += &format!("}} {keyword} {{\n");
            }
            self.nested_block(block, depth + 1);
        }
        if blocks.is_empty() {
            self.loc_comment(op.loc);
        } else {
            self.indent(depth);
            self.out += "}\n";
        }
    }

    /// `{`, one `task <attributes> { ... }` per task, `}`.
    fn tasks(&mut self, tasks: &[TaskRegion], loc: SrcLoc, depth: usize) {
        self.out += " {";
        self.loc_comment(loc);
        for task in tasks {
            self.indent(depth + 1);
            self.out += "task";
            if task.default {
                self.out += " default";
            }
            for (key, value) in [
                ("num_warps", task.num_warps),
                ("num_regs", task.num_regs),
                ("replicate", (task.replicate != 1).then_some(task.replicate)),
                ("start_warp", task.start_warp),
            ] {
                if let Some(n) = value {
                    let _ = write!(self.out, " {key} {n}");
                }
            }
            if task.shared_body {
                self.out += " shared_body";
            }
            self.out += " {\n";
            self.nested_block(&task.body, depth + 2);
            self.indent(depth + 1);
            self.out += "}\n";
        }
        self.indent(depth);
        self.out += "}\n";
    }

    fn loc_comment(&mut self, loc: SrcLoc) {
        if loc != SrcLoc::default() {
            self.out += &format!("  // line {}:{}", loc.line, loc.col);
        }
        self.out += "\n";
    }
}

/// Every value a param, an op result or a block arg defines.
fn defined_values(kernel: &Kernel) -> HashSet<u32> {
    fn walk(block: &Block, set: &mut HashSet<u32>) {
        set.extend(block.args.iter().map(|a| a.0));
        for op in &block.ops {
            set.extend(op.results.iter().map(|r| r.0));
            for nested in op.kind.blocks() {
                walk(nested, set);
            }
        }
    }
    let mut set: HashSet<u32> = kernel.params.iter().map(|p| p.value.0).collect();
    walk(&kernel.body, &mut set);
    set
}

fn values(vs: &[ValueId]) -> String {
    let texts: Vec<String> = vs.iter().map(ValueId::to_string).collect();
    texts.join(", ")
}

fn index_list(items: &[usize]) -> String {
    let texts: Vec<String> = items.iter().map(usize::to_string).collect();
    format!("[{}]", texts.join(", "))
}

fn literal_text(lit: Literal) -> String {
    match lit {
        Literal::Bool(b) => b.to_string(),
        Literal::Int(i) => i.to_string(),
        // NaN keeps its exact bits; every other float prints in Rust's shortest
        // round-trip form, which always has a `.`, an `e` or is `inf`.
        Literal::Float(f) if f.is_nan() => format!("nan:0x{:016x}", f.to_bits()),
        Literal::Float(f) => format!("{f:?}"),
    }
}

/// The op's mnemonic and operands, without results, types and nested blocks.
fn op_head(kind: &OpKind) -> String {
    let operands = op_operands(kind);
    if operands.is_empty() {
        kind.mnemonic().to_string()
    } else {
        format!("{} {operands}", kind.mnemonic())
    }
}

/// The operands and attributes that follow the mnemonic.
fn op_operands(kind: &OpKind) -> String {
    use OpKind::*;
    match kind {
        Constant(lit) => literal_text(*lit),
        ProgramId { axis } => axis.to_string(),
        NumPrograms { axis } => axis.to_string(),
        MultipleOf { value, factor } => format!("{value}, {factor}"),
        ClusterCtaRank | ClusterBarrier => String::new(),
        Arange { start, end } => format!("{start}, {end}"),
        Splat(v) | Broadcast(v) | Reshape(v) | Cast(v) | Bitcast(v) => v.to_string(),
        ExpandDims { value, axis } => format!("{value}, axis {axis}"),
        Trans { value, perm } => format!("{value}, perm {}", index_list(perm)),
        Binary { lhs, rhs, .. } => format!("{lhs}, {rhs}"),
        Unary { value, .. } => value.to_string(),
        Compare { pred, lhs, rhs } => format!("{} {lhs}, {rhs}", name_of(&CMP_PREDS, *pred)),
        Select {
            cond,
            on_true,
            on_false,
        } => format!("{cond}, {on_true}, {on_false}"),
        Fma { a, b, c } => format!("{a}, {b}, {c}"),
        AddPtr { ptr, offset } => format!("{ptr}, {offset}"),
        Load {
            ptr,
            mask,
            other,
            cache,
            eviction,
            volatile,
        } => {
            let mut s = ptr.to_string();
            push_optional_value(&mut s, "mask", *mask);
            push_optional_value(&mut s, "other", *other);
            push_memory_hints(&mut s, *cache, *eviction);
            if *volatile {
                s += " volatile";
            }
            s
        }
        Store {
            ptr,
            value,
            mask,
            cache,
            eviction,
        } => {
            let mut s = format!("{ptr}, {value}");
            push_optional_value(&mut s, "mask", *mask);
            push_memory_hints(&mut s, *cache, *eviction);
            s
        }
        Reduce { value, axis, kind } => {
            format!("{} {value}, axis {axis}", name_of(&REDUCE_KINDS, *kind))
        }
        Scan {
            value,
            axis,
            reverse,
            combine,
        } => {
            let reverse = if *reverse { " reverse" } else { "" };
            format!("{} {value}, axis {axis}{reverse}", combine.mnemonic())
        }
        Dot {
            a,
            b,
            acc,
            precision,
        } => format!(
            "{a}, {b}, {acc} precision {}",
            name_of(&DOT_PRECISIONS, *precision)
        ),
        AtomicRmw {
            op,
            ptr,
            value,
            mask,
            sem,
            scope,
        } => {
            let mut s = format!("{} {ptr}, {value}", name_of(&ATOMIC_OPS, *op));
            push_optional_value(&mut s, "mask", *mask);
            push_sem_scope(&mut s, *sem, *scope);
            s
        }
        AtomicCas {
            ptr,
            cmp,
            value,
            sem,
            scope,
        } => {
            let mut s = format!("{ptr}, {cmp}, {value}");
            push_sem_scope(&mut s, *sem, *scope);
            s
        }
        Join { a, b } => format!("{a}, {b}"),
        Split(value) => value.to_string(),
        ExtractTile { value, index } => {
            format!("{value}, index {}", index_list(index))
        }
        InsertTile { value, tile, index } => {
            format!("{value}, {tile}, index {}", index_list(index))
        }
        For {
            lower,
            upper,
            step,
            inits,
            ..
        } => format!("{lower} to {upper} step {step} iter({})", values(inits)),
        While { inits, .. } => format!("iter({})", values(inits)),
        If { cond, .. } => cond.to_string(),
        Yield(vs) => values(vs),
        // Operands, then the immediates in brackets: `%3, %4 [1]`.
        Prim { args, imms, .. } => {
            let mut s = values(args);
            if !imms.is_empty() {
                let texts: Vec<String> = imms.iter().map(i64::to_string).collect();
                let space = if s.is_empty() { "" } else { " " };
                let _ = write!(s, "{space}[{}]", texts.join(", "));
            }
            s
        }
        Condition(v) => v.to_string(),
        Print { prefix, values: vs } => {
            let mut s = quote(prefix);
            for v in vs {
                let _ = write!(s, ", {v}");
            }
            s
        }
        Assert { cond, message } => format!("{cond}, {}", quote(message)),
        // The tasks follow in braces.
        AsyncTasks { .. } | AsyncTaskReplicaId => String::new(),
    }
}

fn push_optional_value(s: &mut String, key: &str, value: Option<ValueId>) {
    if let Some(v) = value {
        let _ = write!(s, " {key} {v}");
    }
}

fn push_memory_hints(s: &mut String, cache: CacheModifier, eviction: EvictionPolicy) {
    if cache != CacheModifier::default() {
        let _ = write!(s, " cache {}", name_of(&CACHE_MODIFIERS, cache));
    }
    if eviction != EvictionPolicy::default() {
        let _ = write!(s, " eviction {}", name_of(&EVICTION_POLICIES, eviction));
    }
}

fn push_sem_scope(s: &mut String, sem: MemSem, scope: MemScope) {
    let _ = write!(
        s,
        " sem {} scope {}",
        name_of(&MEM_SEMS, sem),
        name_of(&MEM_SCOPES, scope)
    );
}

/// A double-quoted string with `\\`, `\"` and control characters escaped,
/// so that the text stays one line per op.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out += "\\\"",
            '\\' => out += "\\\\",
            '\n' => out += "\\n",
            '\r' => out += "\\r",
            '\t' => out += "\\t",
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

// ----------------------------------------------------------------- parsing

/// Read a kernel from its text form (see [`print`]).
pub fn parse(text: &str) -> Result<Kernel, ParseError> {
    let mut parser = Parser {
        src: text,
        pos: 0,
        line: 1,
        types: HashMap::new(),
        operands: Vec::new(),
        depth: 0,
    };
    let kernel = parser.kernel()?;
    parser.finish(kernel)
}

struct Parser<'s> {
    src: &'s str,
    pos: usize,
    line: usize,
    /// The type of every value defined so far, and the line defining it.
    types: HashMap<u32, (Type, usize)>,
    /// Operands read, with their line, checked once all values are known.
    operands: Vec<(ValueId, usize)>,
    depth: usize,
}

type PResult<T> = Result<T, ParseError>;

impl<'s> Parser<'s> {
    fn error<T>(&self, message: impl Into<String>) -> PResult<T> {
        Err(ParseError {
            line: self.line,
            message: message.into(),
        })
    }

    fn rest(&self) -> &'s str {
        &self.src[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    /// Spaces and tabs within a line.
    fn skip_inline(&mut self) {
        while matches!(self.peek(), Some(' ' | '\t' | '\r')) {
            self.bump();
        }
    }

    /// Blank lines and whole-line comments between items.
    fn skip_lines(&mut self) {
        loop {
            match self.peek() {
                Some(c) if c.is_whitespace() => {
                    self.bump();
                }
                Some('/') if self.rest().starts_with("//") => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.bump();
                    }
                }
                _ => return,
            }
        }
    }

    fn end_of_line(&mut self) -> PResult<()> {
        self.skip_inline();
        match self.peek() {
            None => Ok(()),
            Some('\n') => {
                self.bump();
                Ok(())
            }
            Some(c) => self.error(format!("unexpected `{c}` at the end of a line")),
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_inline();
        if self.rest().starts_with(token) {
            for _ in token.chars() {
                self.bump();
            }
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> PResult<()> {
        if self.eat(token) {
            Ok(())
        } else {
            self.error(format!("expected `{token}`, found {}", self.found()))
        }
    }

    fn found(&self) -> String {
        match self.rest().split_whitespace().next() {
            Some(word) => format!("`{}`", word.chars().take(40).collect::<String>()),
            None => "the end of the text".to_string(),
        }
    }

    /// A word of letters, digits and `_` (may be empty).
    fn word(&mut self) -> &'s str {
        self.skip_inline();
        let start = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_alphanumeric() || c == '_') {
            self.bump();
        }
        &self.src[start..self.pos]
    }

    fn peek_word(&mut self) -> &'s str {
        let (pos, line) = (self.pos, self.line);
        let word = self.word();
        self.pos = pos;
        self.line = line;
        word
    }

    fn keyword(&mut self, expected: &str) -> PResult<()> {
        let word = self.word();
        if word == expected {
            Ok(())
        } else {
            self.error(format!("expected `{expected}`, found `{word}`"))
        }
    }

    fn number<T: std::str::FromStr>(&mut self, what: &str) -> PResult<T> {
        self.skip_inline();
        let start = self.pos;
        if self.peek() == Some('-') {
            self.bump();
        }
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.bump();
        }
        let text = &self.src[start..self.pos];
        match text.parse() {
            Ok(n) => Ok(n),
            Err(_) => self.error(format!("expected {what}, found `{text}`")),
        }
    }

    fn lookup<T: Copy>(&mut self, table: &[(T, &'static str)], what: &str) -> PResult<T> {
        let word = self.word();
        match item_of(table, word) {
            Some(item) => Ok(item),
            None => self.error(format!("unknown {what} `{word}`")),
        }
    }

    fn string(&mut self) -> PResult<String> {
        self.expect("\"")?;
        let mut out = String::new();
        loop {
            if matches!(self.peek(), None | Some('\n')) {
                return self.error("unterminated string");
            }
            match self.bump() {
                None | Some('\n') => return self.error("unterminated string"),
                Some('"') => return Ok(out),
                Some('\\') => match self.bump() {
                    Some('"') => out.push('"'),
                    Some('\\') => out.push('\\'),
                    Some('n') => out.push('\n'),
                    Some('r') => out.push('\r'),
                    Some('t') => out.push('\t'),
                    Some('u') => {
                        self.expect("{")?;
                        let start = self.pos;
                        while matches!(self.peek(), Some(c) if c.is_ascii_hexdigit()) {
                            self.bump();
                        }
                        let hex = &self.src[start..self.pos];
                        let c = u32::from_str_radix(hex, 16).ok().and_then(char::from_u32);
                        let Some(c) = c else {
                            return self.error(format!("bad escape `\\u{{{hex}}}`"));
                        };
                        out.push(c);
                        self.expect("}")?;
                    }
                    _ => return self.error("unknown escape in a string"),
                },
                Some(c) => out.push(c),
            }
        }
    }

    /// A value operand, remembered so that its existence is checked at the end.
    fn operand(&mut self) -> PResult<ValueId> {
        let v = self.value_name()?;
        self.operands.push((v, self.line));
        Ok(v)
    }

    fn value_name(&mut self) -> PResult<ValueId> {
        self.skip_inline();
        if self.peek() != Some('%') {
            return self.error(format!("expected a value `%N`, found {}", self.found()));
        }
        self.bump();
        let start = self.pos;
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            self.bump();
        }
        match self.src[start..self.pos].parse() {
            Ok(n) => Ok(ValueId(n)),
            Err(_) => self.error("bad value number"),
        }
    }

    fn define(&mut self, v: ValueId, ty: Type) -> PResult<()> {
        if self.types.insert(v.0, (ty, self.line)).is_some() {
            return self.error(format!("{v} is defined twice"));
        }
        Ok(())
    }

    /// `%a, %b, ...` (possibly empty when `allow_empty`).
    fn operand_list(&mut self, allow_empty: bool) -> PResult<Vec<ValueId>> {
        self.skip_inline();
        let mut list = Vec::new();
        if allow_empty && self.peek() != Some('%') {
            return Ok(list);
        }
        loop {
            list.push(self.operand()?);
            if !self.eat(",") {
                return Ok(list);
            }
        }
    }

    fn index_list(&mut self) -> PResult<Vec<usize>> {
        self.expect("[")?;
        let mut list = Vec::new();
        if self.eat("]") {
            return Ok(list);
        }
        loop {
            list.push(self.number("an index")?);
            if self.eat("]") {
                return Ok(list);
            }
            self.expect(",")?;
        }
    }

    fn scalar_type(&mut self) -> PResult<ScalarType> {
        let word = self.word();
        match ScalarType::from_name(word) {
            Some(s) => Ok(s),
            None => self.error(format!("unknown element type `{word}`")),
        }
    }

    fn elem(&mut self) -> PResult<Elem> {
        if self.eat("ptr<") {
            let s = self.scalar_type()?;
            let mut space = AddressSpace::Global;
            if self.eat(",") {
                let word = self.word();
                space = match AddressSpace::from_name(word) {
                    Some(space) => space,
                    None => return self.error(format!("unknown address space `{word}`")),
                };
            }
            self.expect(">")?;
            Ok(Elem::Ptr(s, space))
        } else {
            Ok(Elem::Scalar(self.scalar_type()?))
        }
    }

    fn ty(&mut self) -> PResult<Type> {
        if self.eat("tensor<") {
            let shape = self.dims()?;
            let elem = self.elem()?;
            self.expect(">")?;
            return Ok(Type::tensor(elem, shape));
        }
        if self.eat("smem<") {
            let shape = self.dims()?;
            let elem = self.scalar_type()?;
            self.expect(",")?;
            self.keyword("buffers")?;
            let buffers = self.number("a buffer count")?;
            self.expect(",")?;
            self.keyword("swizzle")?;
            let word = self.word();
            let Some(swizzle) = Swizzle::from_name(word) else {
                return self.error(format!("unknown swizzle `{word}`"));
            };
            self.expect(",")?;
            let mutable = match self.word() {
                "mutable" => true,
                "immutable" => false,
                other => {
                    return self.error(format!(
                        "expected `mutable` or `immutable`, found `{other}`"
                    ))
                }
            };
            // Then `, transposed` and `, remote`, each when it holds.
            let mut transposed = false;
            let mut remote = false;
            while self.eat(",") {
                match self.word() {
                    "transposed" if !transposed && !remote => transposed = true,
                    "remote" if !remote => remote = true,
                    other => {
                        return self.error(format!(
                            "expected `transposed` or `remote`, found `{other}`"
                        ))
                    }
                }
            }
            self.expect(">")?;
            let mut memory = SharedMemoryType::new(elem, shape, buffers, swizzle, mutable);
            if transposed {
                // Stored as the transpose of the shape just read.
                memory = SharedMemoryType::new(
                    memory.elem(),
                    memory.shape().iter().rev().copied().collect(),
                    buffers,
                    swizzle,
                    mutable,
                )
                .transpose();
            }
            if remote {
                memory = memory.to_remote();
            }
            return Ok(Type::SharedMemory(memory));
        }
        if self.eat("tmem<") {
            let shape = self.dims()?;
            let elem = self.scalar_type()?;
            self.expect(",")?;
            self.keyword("buffers")?;
            let buffers = self.number("a buffer count")?;
            self.expect(">")?;
            return Ok(Type::TensorMemory(TensorMemoryType::new(
                elem, shape, buffers,
            )));
        }
        if self.eat("barriers<") {
            let count = self.number("a barrier count")?;
            let remote = self.eat(",") && {
                self.keyword("remote")?;
                true
            };
            self.expect(">")?;
            let barriers = BarrierType::new(count);
            return Ok(Type::Barriers(if remote {
                barriers.to_remote()
            } else {
                barriers
            }));
        }
        if self.eat("tensordesc<") {
            let shape = self.dims()?;
            let elem = self.scalar_type()?;
            self.expect(">")?;
            return Ok(Type::TensorDescriptor(TensorDescriptorType::new(
                elem, shape,
            )));
        }
        if self.peek_word() == "token" {
            self.word();
            return Ok(Type::AsyncToken);
        }
        Ok(Type::tensor(self.elem()?, Vec::new()))
    }

    /// Dimensions, each followed by `x` (none for a scalar).
    fn dims(&mut self) -> PResult<Vec<usize>> {
        let mut shape = Vec::new();
        while matches!(self.peek(), Some(c) if c.is_ascii_digit()) {
            shape.push(self.number("a dimension")?);
            if self.peek() != Some('x') {
                return self.error("expected `x` after a dimension");
            }
            self.bump();
        }
        Ok(shape)
    }

    fn literal(&mut self) -> PResult<Literal> {
        self.skip_inline();
        let start = self.pos;
        while matches!(self.peek(), Some(c) if !c.is_whitespace()) {
            self.bump();
        }
        let text = &self.src[start..self.pos];
        let literal = match text {
            "true" => Some(Literal::Bool(true)),
            "false" => Some(Literal::Bool(false)),
            _ => {
                if let Some(hex) = text.strip_prefix("nan:0x") {
                    u64::from_str_radix(hex, 16)
                        .ok()
                        .map(|bits| Literal::Float(f64::from_bits(bits)))
                } else if text.contains(['.', 'e', 'i']) {
                    text.parse().ok().map(Literal::Float)
                } else {
                    text.parse().ok().map(Literal::Int)
                }
            }
        };
        match literal {
            Some(l) => Ok(l),
            None => self.error(format!("bad literal `{text}`")),
        }
    }

    /// An optional `// line L:C` comment ending an op's first line.
    fn loc_comment(&mut self) -> PResult<SrcLoc> {
        self.skip_inline();
        if !self.rest().starts_with("//") {
            return Ok(SrcLoc::default());
        }
        let start = self.pos;
        while !matches!(self.peek(), None | Some('\n')) {
            self.bump();
        }
        let comment = self.src[start + 2..self.pos].trim();
        let Some(position) = comment.strip_prefix("line ") else {
            return Ok(SrcLoc::default());
        };
        let parsed = position
            .split_once(':')
            .and_then(|(l, c)| Some((l.parse().ok()?, c.parse().ok()?)));
        match parsed {
            Some((line, col)) => Ok(SrcLoc { line, col }),
            None => self.error(format!("bad source location `{position}`")),
        }
    }

    fn kernel(&mut self) -> PResult<Kernel> {
        self.skip_lines();
        self.keyword("kernel")?;
        let name = self.string()?;
        self.expect("{")?;
        self.end_of_line()?;
        let mut kernel = Kernel {
            name,
            params: Vec::new(),
            consts: Vec::new(),
            options: KernelOptions::default(),
            body: Block::default(),
            types: Vec::new(),
            source_file: String::new(),
            names: Default::default(),
        };
        loop {
            self.skip_lines();
            if self.eat("}") {
                break;
            }
            if self.peek().is_none() {
                return self.error("unclosed kernel: expected `}`");
            }
            match self.peek_word() {
                "source" => {
                    self.word();
                    kernel.source_file = self.string()?;
                }
                "options" => {
                    self.word();
                    self.keyword("num_warps")?;
                    kernel.options.num_warps = self.number("a warp count")?;
                    self.keyword("num_stages")?;
                    kernel.options.num_stages = self.number("a stage count")?;
                    if self.peek_word() == "cluster" {
                        self.word();
                        for d in &mut kernel.options.cluster {
                            *d = self.number("a cluster dimension")?;
                        }
                    }
                    if self.peek_word() == "maxnreg" {
                        self.word();
                        kernel.options.maxnreg = Some(self.number("a register count")?);
                    }
                    if self.peek_word() == "mbar_timeout_ns" {
                        self.word();
                        kernel.options.mbar_timeout_ns = Some(self.number("nanoseconds")?);
                    }
                    if self.peek_word() == "launch_pdl" {
                        self.word();
                        kernel.options.launch_pdl = true;
                    }
                }
                "const" => {
                    self.word();
                    let name = self.string()?;
                    kernel.consts.push((name, self.number("an integer")?));
                }
                "param" => {
                    self.word();
                    let name = self.string()?;
                    let value = self.value_name()?;
                    let ty = self.ty()?;
                    let kind = match (&ty, ty.elem(), ty.is_tensor() && ty.is_scalar()) {
                        (_, Elem::Ptr(s, AddressSpace::Global), true) => ParamKind::Ptr(s),
                        (_, Elem::Scalar(s), true) => ParamKind::Scalar(s),
                        (Type::TensorDescriptor(d), ..) => {
                            match DescriptorBlock::new(d.elem(), d.block_shape()) {
                                Some(block) => ParamKind::TensorDesc(block),
                                None => {
                                    return self.error("a descriptor block outside TMA's limits")
                                }
                            }
                        }
                        _ => {
                            return self.error(
                                "a param must be a scalar, a global pointer or a tensor descriptor",
                            )
                        }
                    };
                    self.define(value, kind.value_type())?;
                    kernel.params.push(Param { name, kind, value });
                }
                "value" => {
                    self.word();
                    let value = self.value_name()?;
                    self.expect(":")?;
                    let ty = self.ty()?;
                    self.define(value, ty)?;
                }
                _ => {
                    let op = self.op()?;
                    kernel.body.ops.push(op);
                    continue;
                }
            }
            self.end_of_line()?;
        }
        self.skip_lines();
        if self.peek().is_some() {
            return self.error(format!("text after the kernel: {}", self.found()));
        }
        Ok(kernel)
    }

    /// A nested block after its `{` and location: optional args, ops, `}`.
    fn block(&mut self) -> PResult<Block> {
        if self.depth >= MAX_BLOCK_DEPTH {
            return self.error("blocks nested too deeply");
        }
        self.depth += 1;
        let mut block = Block::default();
        self.skip_lines();
        if self.eat("^(") {
            if !self.eat(")") {
                loop {
                    let arg = self.value_name()?;
                    self.expect(":")?;
                    let ty = self.ty()?;
                    self.define(arg, ty)?;
                    block.args.push(arg);
                    if self.eat(")") {
                        break;
                    }
                    self.expect(",")?;
                }
            }
            self.end_of_line()?;
        }
        loop {
            self.skip_lines();
            if self.eat("}") {
                break;
            }
            if self.peek().is_none() {
                return self.error("unclosed block: expected `}`");
            }
            block.ops.push(self.op()?);
        }
        self.depth -= 1;
        Ok(block)
    }

    fn op(&mut self) -> PResult<Op> {
        let mut results = Vec::new();
        self.skip_inline();
        if self.peek() == Some('%') {
            loop {
                results.push(self.value_name()?);
                if !self.eat(",") {
                    break;
                }
            }
            self.expect("=")?;
        }
        let name = self.word();
        let mut kind = self.op_operands(name)?;
        if !results.is_empty() {
            self.expect(":")?;
            for (i, r) in results.iter().enumerate() {
                if i > 0 {
                    self.expect(",")?;
                }
                let ty = self.ty()?;
                self.define(*r, ty)?;
            }
        }
        let loc = self.nested_blocks(&mut kind)?;
        // `finish` numbers the ops once the whole tree is read.
        Ok(Op {
            id: OpId::default(),
            kind,
            results,
            loc,
        })
    }

    /// The location comment, and for control flow the nested blocks after it.
    fn nested_blocks(&mut self, kind: &mut OpKind) -> PResult<SrcLoc> {
        if !kind.effects().regions {
            let loc = self.loc_comment()?;
            self.end_of_line()?;
            return Ok(loc);
        }
        self.expect("{")?;
        let loc = self.loc_comment()?;
        self.end_of_line()?;
        if let OpKind::AsyncTasks { tasks } = kind {
            *tasks = self.tasks()?;
            self.end_of_line()?;
            return Ok(loc);
        }
        let first = self.block()?;
        match kind {
            OpKind::For { body, .. } => *body = first,
            OpKind::While { cond, body, .. } => {
                *cond = first;
                self.keyword("do")?;
                self.expect("{")?;
                self.end_of_line()?;
                *body = self.block()?;
            }
            OpKind::If {
                then_block,
                else_block,
                ..
            } => {
                *then_block = first;
                self.keyword("else")?;
                self.expect("{")?;
                self.end_of_line()?;
                *else_block = self.block()?;
            }
            _ => {}
        }
        self.end_of_line()?;
        Ok(loc)
    }

    /// An op's operands and attributes, given its name; blocks are left empty.
    fn op_operands(&mut self, name: &str) -> PResult<OpKind> {
        use OpKind::*;
        let Some(code) = OpCode::from_mnemonic(name) else {
            return match name {
                "" => self.error(format!("expected an op, found {}", self.found())),
                other => self.error(format!("unknown op `{other}`")),
            };
        };
        let kind = match code {
            OpCode::Binary(op) => {
                let lhs = self.operand()?;
                self.expect(",")?;
                let rhs = self.operand()?;
                Binary { op, lhs, rhs }
            }
            OpCode::Unary(op) => Unary {
                op,
                value: self.operand()?,
            },
            OpCode::Constant => Constant(self.literal()?),
            OpCode::ProgramId => ProgramId {
                axis: self.number("an axis")?,
            },
            OpCode::NumPrograms => NumPrograms {
                axis: self.number("an axis")?,
            },
            OpCode::MultipleOf => {
                let value = self.operand()?;
                self.expect(",")?;
                let factor = self.number("a factor")?;
                MultipleOf { value, factor }
            }
            OpCode::ClusterCtaRank => ClusterCtaRank,
            OpCode::ClusterBarrier => ClusterBarrier,
            OpCode::Arange => {
                let start = self.number("an integer")?;
                self.expect(",")?;
                let end = self.number("an integer")?;
                Arange { start, end }
            }
            OpCode::Splat => Splat(self.operand()?),
            OpCode::Broadcast => Broadcast(self.operand()?),
            OpCode::Reshape => Reshape(self.operand()?),
            OpCode::Cast => Cast(self.operand()?),
            OpCode::Bitcast => Bitcast(self.operand()?),
            OpCode::ExpandDims => {
                let value = self.operand()?;
                let axis = self.axis()?;
                ExpandDims { value, axis }
            }
            OpCode::Trans => {
                let value = self.operand()?;
                self.expect(",")?;
                self.keyword("perm")?;
                let perm = self.index_list()?;
                Trans { value, perm }
            }
            OpCode::Compare => {
                let pred = self.lookup(&CMP_PREDS, "comparison")?;
                let lhs = self.operand()?;
                self.expect(",")?;
                let rhs = self.operand()?;
                Compare { pred, lhs, rhs }
            }
            OpCode::Select => {
                let [cond, on_true, on_false] = self.operands3()?;
                Select {
                    cond,
                    on_true,
                    on_false,
                }
            }
            OpCode::Fma => {
                let [a, b, c] = self.operands3()?;
                Fma { a, b, c }
            }
            OpCode::AddPtr => {
                let ptr = self.operand()?;
                self.expect(",")?;
                let offset = self.operand()?;
                AddPtr { ptr, offset }
            }
            OpCode::Load => self.load()?,
            OpCode::Store => self.store()?,
            OpCode::Reduce => {
                let kind = self.lookup(&REDUCE_KINDS, "reduction")?;
                let value = self.operand()?;
                let axis = self.axis()?;
                Reduce { value, axis, kind }
            }
            OpCode::Scan => {
                let combine = self.lookup(&SCAN_COMBINES, "scan combine")?;
                let value = self.operand()?;
                let axis = self.axis()?;
                let reverse = self.peek_word() == "reverse";
                if reverse {
                    self.word();
                }
                Scan {
                    value,
                    axis,
                    reverse,
                    combine,
                }
            }
            OpCode::Dot => {
                let [a, b, acc] = self.operands3()?;
                self.keyword("precision")?;
                let precision = self.lookup(&DOT_PRECISIONS, "dot precision")?;
                Dot {
                    a,
                    b,
                    acc,
                    precision,
                }
            }
            OpCode::AtomicRmw => {
                let op = self.lookup(&ATOMIC_OPS, "atomic op")?;
                let ptr = self.operand()?;
                self.expect(",")?;
                let value = self.operand()?;
                let mask = self.optional_value("mask")?;
                let (sem, scope) = self.sem_scope()?;
                AtomicRmw {
                    op,
                    ptr,
                    value,
                    mask,
                    sem,
                    scope,
                }
            }
            OpCode::AtomicCas => {
                let [ptr, cmp, value] = self.operands3()?;
                let (sem, scope) = self.sem_scope()?;
                AtomicCas {
                    ptr,
                    cmp,
                    value,
                    sem,
                    scope,
                }
            }
            OpCode::Join => {
                let a = self.operand()?;
                self.expect(",")?;
                let b = self.operand()?;
                Join { a, b }
            }
            OpCode::Split => Split(self.operand()?),
            OpCode::ExtractTile => {
                let value = self.operand()?;
                self.expect(",")?;
                self.keyword("index")?;
                let index = self.index_list()?;
                ExtractTile { value, index }
            }
            OpCode::InsertTile => {
                let value = self.operand()?;
                self.expect(",")?;
                let tile = self.operand()?;
                self.expect(",")?;
                self.keyword("index")?;
                let index = self.index_list()?;
                InsertTile { value, tile, index }
            }
            OpCode::For => {
                let lower = self.operand()?;
                self.keyword("to")?;
                let upper = self.operand()?;
                self.keyword("step")?;
                let step = self.operand()?;
                let inits = self.iter_list()?;
                For {
                    lower,
                    upper,
                    step,
                    inits,
                    body: Block::default(),
                }
            }
            OpCode::While => While {
                inits: self.iter_list()?,
                cond: Block::default(),
                body: Block::default(),
            },
            OpCode::If => If {
                cond: self.operand()?,
                then_block: Block::default(),
                else_block: Block::default(),
            },
            OpCode::Yield => Yield(self.operand_list(true)?),
            OpCode::Prim(prim) => {
                let args = self.operand_list(true)?;
                let mut imms = Vec::new();
                if self.eat("[") {
                    loop {
                        imms.push(self.number("an immediate")?);
                        if self.eat("]") {
                            break;
                        }
                        self.expect(",")?;
                    }
                }
                Prim { prim, args, imms }
            }
            OpCode::Condition => Condition(self.operand()?),
            OpCode::Print => {
                let prefix = self.string()?;
                let mut values = Vec::new();
                while self.eat(",") {
                    values.push(self.operand()?);
                }
                Print { prefix, values }
            }
            OpCode::AsyncTasks => AsyncTasks { tasks: Vec::new() },
            OpCode::AsyncTaskReplicaId => AsyncTaskReplicaId,
            OpCode::Assert => {
                let cond = self.operand()?;
                self.expect(",")?;
                let message = self.string()?;
                Assert { cond, message }
            }
        };
        Ok(kind)
    }

    /// The tasks of `async_tasks` after its `{` line, through its `}`.
    fn tasks(&mut self) -> PResult<Vec<TaskRegion>> {
        let mut tasks = Vec::new();
        loop {
            self.skip_lines();
            if self.eat("}") {
                return Ok(tasks);
            }
            self.keyword("task")?;
            let mut task = TaskRegion::default_task(Block::default());
            task.default = self.peek_word() == "default";
            if task.default {
                self.word();
            }
            for key in ["num_warps", "num_regs", "replicate", "start_warp"] {
                if self.peek_word() != key {
                    continue;
                }
                self.word();
                let n = self.number(key)?;
                match key {
                    "num_warps" => task.num_warps = Some(n),
                    "num_regs" => task.num_regs = Some(n),
                    "replicate" => task.replicate = n,
                    _ => task.start_warp = Some(n),
                }
            }
            if self.peek_word() == "shared_body" {
                self.word();
                task.shared_body = true;
            }
            self.expect("{")?;
            self.end_of_line()?;
            task.body = self.block()?;
            self.end_of_line()?;
            tasks.push(task);
        }
    }

    fn operands3(&mut self) -> PResult<[ValueId; 3]> {
        let a = self.operand()?;
        self.expect(",")?;
        let b = self.operand()?;
        self.expect(",")?;
        let c = self.operand()?;
        Ok([a, b, c])
    }

    fn axis(&mut self) -> PResult<usize> {
        self.expect(",")?;
        self.keyword("axis")?;
        self.number("an axis")
    }

    fn iter_list(&mut self) -> PResult<Vec<ValueId>> {
        self.keyword("iter")?;
        self.expect("(")?;
        let inits = self.operand_list(true)?;
        self.expect(")")?;
        Ok(inits)
    }

    fn optional_value(&mut self, key: &str) -> PResult<Option<ValueId>> {
        if self.peek_word() == key {
            self.word();
            return Ok(Some(self.operand()?));
        }
        Ok(None)
    }

    fn memory_hints(&mut self) -> PResult<(CacheModifier, EvictionPolicy)> {
        let mut cache = CacheModifier::default();
        let mut eviction = EvictionPolicy::default();
        if self.peek_word() == "cache" {
            self.word();
            cache = self.lookup(&CACHE_MODIFIERS, "cache modifier")?;
        }
        if self.peek_word() == "eviction" {
            self.word();
            eviction = self.lookup(&EVICTION_POLICIES, "eviction policy")?;
        }
        Ok((cache, eviction))
    }

    fn load(&mut self) -> PResult<OpKind> {
        let ptr = self.operand()?;
        let mask = self.optional_value("mask")?;
        let other = self.optional_value("other")?;
        let (cache, eviction) = self.memory_hints()?;
        let volatile = self.peek_word() == "volatile";
        if volatile {
            self.word();
        }
        Ok(OpKind::Load {
            ptr,
            mask,
            other,
            cache,
            eviction,
            volatile,
        })
    }

    fn store(&mut self) -> PResult<OpKind> {
        let ptr = self.operand()?;
        self.expect(",")?;
        let value = self.operand()?;
        let mask = self.optional_value("mask")?;
        let (cache, eviction) = self.memory_hints()?;
        Ok(OpKind::Store {
            ptr,
            value,
            mask,
            cache,
            eviction,
        })
    }

    fn sem_scope(&mut self) -> PResult<(MemSem, MemScope)> {
        self.keyword("sem")?;
        let sem = self.lookup(&MEM_SEMS, "memory order")?;
        self.keyword("scope")?;
        let scope = self.lookup(&MEM_SCOPES, "memory scope")?;
        Ok((sem, scope))
    }

    /// Builds the type table: every value from 0 to the last must be defined
    /// exactly once, and every operand must name one of them.
    fn finish(&mut self, mut kernel: Kernel) -> PResult<Kernel> {
        let count = self.types.len();
        let mut types = vec![None; count];
        for (id, (ty, line)) in self.types.drain() {
            match types.get_mut(id as usize) {
                Some(slot) => *slot = Some(ty),
                None => {
                    return Err(ParseError {
                        line,
                        message: format!(
                            "value %{id} is beyond the {count} defined values; \
                             values must be numbered from %0 without gaps"
                        ),
                    })
                }
            }
        }
        for (v, line) in &self.operands {
            if v.index() >= count {
                return Err(ParseError {
                    line: *line,
                    message: format!("{v} is used but never defined"),
                });
            }
        }
        kernel.types = types.into_iter().flatten().collect();
        kernel.number_ops();
        Ok(kernel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::Builder;

    fn t(s: ScalarType, shape: &[usize]) -> Type {
        Type::tensor(Elem::Scalar(s), shape.to_vec())
    }

    /// A kernel that uses every op kind, every attribute value that prints
    /// differently, and every element type.
    fn kitchen_sink() -> Kernel {
        use ScalarType::*;
        let mut b = Builder::new(
            "sink \"quoted\"\n\\name",
            KernelOptions {
                num_warps: 8,
                num_stages: 2,
                cluster: [2, 1, 4],
                maxnreg: Some(96),
                mbar_timeout_ns: Some(250_000_000),
                launch_pdl: true,
            },
        );
        b.set_source_file("src/ké rnel.rs\t\u{1}");
        b.add_const("BLOCK", 1024);
        b.add_const("NEG", i64::MIN);
        let x = b.add_param("x", ParamKind::Ptr(F32));
        let n = b.add_param("n", ParamKind::Scalar(I32));
        let flag = b.add_param("flag", ParamKind::Scalar(Bool));
        b.new_value(t(F16, &[3, 5])); // defined by nobody
        b.new_value(Type::tensor(Elem::Ptr(F16, AddressSpace::Shared), vec![2]));
        b.new_value(Type::SharedMemory(SharedMemoryType::new(
            BF16,
            vec![64, 32],
            3,
            Swizzle::Bytes128,
            false,
        )));
        b.new_value(Type::Barriers(BarrierType::new(4)));
        b.new_value(Type::TensorDescriptor(TensorDescriptorType::new(
            F8E4M3,
            vec![128, 64],
        )));
        b.new_value(Type::AsyncToken);
        let peer_buffer = SharedMemoryType::new(BF16, vec![64, 32], 1, Swizzle::Bytes64, true);
        b.new_value(Type::SharedMemory(peer_buffer.transpose().to_remote()));
        b.new_value(Type::Barriers(BarrierType::new(1).to_remote()));
        b.set_loc(SrcLoc { line: 12, col: 5 });
        let i32s = t(I32, &[]);
        let mut consts = Vec::new();
        for lit in [
            Literal::Bool(true),
            Literal::Int(-7),
            Literal::Float(1.5),
            Literal::Float(-0.0),
            Literal::Float(f64::INFINITY),
            Literal::Float(f64::NEG_INFINITY),
            Literal::Float(f64::from_bits(0x7ff8_0000_0000_1234)),
            Literal::Float(1e300),
            Literal::Float(5e-324),
            Literal::Float(0.1),
            Literal::Float(3.0),
        ] {
            consts.push(b.push1(OpKind::Constant(lit), t(F32, &[])));
        }
        for s in ScalarType::ALL {
            b.push1(OpKind::Constant(Literal::Int(1)), t(s, &[2]));
        }
        let pid = b.push1(OpKind::ProgramId { axis: 0 }, i32s.clone());
        b.push1(OpKind::NumPrograms { axis: 2 }, i32s.clone());
        b.push1(OpKind::ClusterCtaRank, i32s.clone());
        b.push1(
            OpKind::MultipleOf {
                value: pid,
                factor: 16,
            },
            i32s.clone(),
        );
        b.push(OpKind::ClusterBarrier, vec![]);
        let offs = b.push1(OpKind::Arange { start: 0, end: 8 }, t(I32, &[8]));
        let sp = b.push1(OpKind::Splat(pid), t(I32, &[8]));
        let ex = b.push1(OpKind::ExpandDims { value: sp, axis: 1 }, t(I32, &[8, 1]));
        let br = b.push1(OpKind::Broadcast(ex), t(I32, &[8, 4]));
        let tr = b.push1(
            OpKind::Trans {
                value: br,
                perm: vec![1, 0],
            },
            t(I32, &[4, 8]),
        );
        let rs = b.push1(OpKind::Reshape(tr), t(I32, &[32]));
        let cf = b.push1(OpKind::Cast(rs), t(F32, &[32]));
        b.push1(OpKind::Bitcast(cf), t(U32, &[32]));
        b.set_loc(SrcLoc { line: 13, col: 0 });
        for op in BinaryOp::ALL {
            b.push1(
                OpKind::Binary {
                    op,
                    lhs: offs,
                    rhs: sp,
                },
                t(I32, &[8]),
            );
        }
        for op in UnaryOp::ALL {
            b.push1(OpKind::Unary { op, value: cf }, t(F32, &[32]));
        }
        let mut masks = Vec::new();
        for (pred, _) in CMP_PREDS {
            masks.push(b.push1(
                OpKind::Compare {
                    pred,
                    lhs: offs,
                    rhs: sp,
                },
                t(Bool, &[8]),
            ));
        }
        let mask = masks[2];
        b.push1(
            OpKind::Select {
                cond: mask,
                on_true: offs,
                on_false: sp,
            },
            t(I32, &[8]),
        );
        b.push1(
            OpKind::Fma {
                a: cf,
                b: cf,
                c: cf,
            },
            t(F32, &[32]),
        );
        let xs = b.push1(
            OpKind::Splat(x),
            Type::tensor(Elem::global_ptr(F32), vec![8]),
        );
        let ptrs = b.push1(
            OpKind::AddPtr {
                ptr: xs,
                offset: offs,
            },
            Type::tensor(Elem::global_ptr(F32), vec![8]),
        );
        let zero = b.push1(OpKind::Constant(Literal::Float(0.0)), t(F32, &[8]));
        let loaded = b.push1(
            OpKind::Load {
                ptr: ptrs,
                mask: Some(mask),
                other: Some(zero),
                cache: CacheModifier::Cg,
                eviction: EvictionPolicy::EvictLast,
                volatile: true,
            },
            t(F32, &[8]),
        );
        b.push1(
            OpKind::Load {
                ptr: ptrs,
                mask: None,
                other: None,
                cache: CacheModifier::None,
                eviction: EvictionPolicy::Normal,
                volatile: false,
            },
            t(F32, &[8]),
        );
        for (cache, _) in CACHE_MODIFIERS {
            for (eviction, _) in EVICTION_POLICIES {
                b.push(
                    OpKind::Store {
                        ptr: ptrs,
                        value: loaded,
                        mask: if cache == CacheModifier::Ca {
                            None
                        } else {
                            Some(mask)
                        },
                        cache,
                        eviction,
                    },
                    vec![],
                );
            }
        }
        let tile = b.push1(OpKind::Reshape(cf), t(F32, &[4, 8]));
        for (kind, _) in REDUCE_KINDS {
            let ty = match kind {
                ReduceKind::Argmax | ReduceKind::Argmin => t(I32, &[8]),
                _ => t(F32, &[8]),
            };
            b.push1(
                OpKind::Reduce {
                    value: tile,
                    axis: 0,
                    kind,
                },
                ty,
            );
        }
        for reverse in [false, true] {
            b.push(
                OpKind::Scan {
                    value: tile,
                    axis: 1,
                    reverse,
                    combine: if reverse {
                        BinaryOp::Max
                    } else {
                        BinaryOp::Add
                    },
                },
                vec![t(F32, &[4, 8]), t(F32, &[4])],
            );
        }
        let sq = b.push1(OpKind::Reshape(cf), t(F32, &[8, 4]));
        let acc = b.push1(OpKind::Constant(Literal::Float(0.0)), t(F32, &[4, 4]));
        for (precision, _) in DOT_PRECISIONS {
            b.push1(
                OpKind::Dot {
                    a: tile,
                    b: sq,
                    acc,
                    precision,
                },
                t(F32, &[4, 4]),
            );
        }
        for (op, _) in ATOMIC_OPS {
            for (sem, _) in MEM_SEMS {
                b.push1(
                    OpKind::AtomicRmw {
                        op,
                        ptr: ptrs,
                        value: loaded,
                        mask: (sem == MemSem::Relaxed).then_some(mask),
                        sem,
                        scope: MemScope::Gpu,
                    },
                    t(F32, &[8]),
                );
            }
        }
        for (scope, _) in MEM_SCOPES {
            b.push1(
                OpKind::AtomicCas {
                    ptr: ptrs,
                    cmp: loaded,
                    value: zero,
                    sem: MemSem::AcqRel,
                    scope,
                },
                t(F32, &[8]),
            );
        }
        let pair = b.push1(OpKind::Join { a: tile, b: tile }, t(F32, &[4, 8, 2]));
        b.push(OpKind::Split(pair), vec![t(F32, &[4, 8]), t(F32, &[4, 8])]);
        let part = b.push1(
            OpKind::ExtractTile {
                value: tile,
                index: vec![1, 0],
            },
            t(F32, &[2, 8]),
        );
        b.push1(
            OpKind::InsertTile {
                value: tile,
                tile: part,
                index: vec![1, 0],
            },
            t(F32, &[4, 8]),
        );
        // for with a nested if inside, and a while with cond and body.
        let one = b.push1(OpKind::Constant(Literal::Int(1)), i32s.clone());
        let args = b.begin_block(vec![i32s.clone(), i32s.clone()]);
        b.set_loc(SrcLoc { line: 20, col: 9 });
        b.begin_block(vec![]);
        let sum = b.push1(
            OpKind::Binary {
                op: BinaryOp::Add,
                lhs: args[0],
                rhs: args[1],
            },
            i32s.clone(),
        );
        b.push(OpKind::Yield(vec![sum]), vec![]);
        let then_block = b.end_block();
        b.begin_block(vec![]);
        b.push(OpKind::Yield(vec![args[1]]), vec![]);
        let else_block = b.end_block();
        let chosen = b.push1(
            OpKind::If {
                cond: flag,
                then_block,
                else_block,
            },
            i32s.clone(),
        );
        b.push(OpKind::Yield(vec![chosen]), vec![]);
        let body = b.end_block();
        let total = b.push1(
            OpKind::For {
                lower: pid,
                upper: n,
                step: one,
                inits: vec![pid],
                body,
            },
            i32s.clone(),
        );
        let cond_args = b.begin_block(vec![i32s.clone()]);
        let more = b.push1(
            OpKind::Compare {
                pred: CmpPred::Lt,
                lhs: cond_args[0],
                rhs: n,
            },
            t(Bool, &[]),
        );
        b.push(OpKind::Condition(more), vec![]);
        let cond = b.end_block();
        let body_args = b.begin_block(vec![i32s.clone()]);
        b.push(OpKind::Yield(vec![body_args[0]]), vec![]);
        let body = b.end_block();
        b.push1(
            OpKind::While {
                inits: vec![total],
                cond,
                body,
            },
            i32s.clone(),
        );
        // An empty-result if and an empty yield.
        b.begin_block(vec![]);
        b.push(OpKind::Yield(vec![]), vec![]);
        let then_block = b.end_block();
        b.begin_block(vec![]);
        b.push(OpKind::Yield(vec![]), vec![]);
        let else_block = b.end_block();
        b.push(
            OpKind::If {
                cond: flag,
                then_block,
                else_block,
            },
            vec![],
        );
        // Task regions: every attribute, an empty body and a nested if.
        b.set_loc(SrcLoc { line: 30, col: 4 });
        b.begin_block(vec![]);
        b.push1(OpKind::AsyncTaskReplicaId, i32s.clone());
        b.begin_block(vec![]);
        b.push(OpKind::Yield(vec![]), vec![]);
        let then_block = b.end_block();
        b.begin_block(vec![]);
        b.push(OpKind::Yield(vec![]), vec![]);
        let else_block = b.end_block();
        b.push(
            OpKind::If {
                cond: flag,
                then_block,
                else_block,
            },
            vec![],
        );
        let trunk = b.end_block();
        b.begin_block(vec![]);
        let copies = b.end_block();
        let mut trunk = TaskRegion::default_task(trunk);
        trunk.num_regs = Some(240);
        let copies = TaskRegion {
            default: false,
            num_warps: Some(2),
            num_regs: Some(24),
            replicate: 2,
            start_warp: Some(8),
            shared_body: true,
            body: copies,
        };
        b.push(
            OpKind::AsyncTasks {
                tasks: vec![trunk, copies],
            },
            vec![],
        );
        b.set_loc(SrcLoc::default());
        b.push(
            OpKind::Print {
                prefix: "x = \"%d\"\n".to_string(),
                values: vec![total, pid],
            },
            vec![],
        );
        b.push(
            OpKind::Print {
                prefix: String::new(),
                values: vec![],
            },
            vec![],
        );
        b.push(
            OpKind::Assert {
                cond: more,
                message: "i < n // not a comment".to_string(),
            },
            vec![],
        );
        // Every primitive, in the shape its row gives (types do not matter
        // to the text): operands, a repeat of a variadic one, immediates.
        for &prim in crate::ir::Prim::ALL {
            let sig = prim.signature();
            let count = sig.operands.len() + usize::from(sig.variadic);
            let imms = (0..sig.immediates.len() as i64).map(|i| i - 1).collect();
            b.push(
                OpKind::Prim {
                    prim,
                    args: vec![n; count],
                    imms,
                },
                vec![t(I32, &[]); sig.results],
            );
        }
        b.finish()
    }

    /// Float literals compare by bits so that NaN payloads count.
    fn float_bits(k: &Kernel) -> Vec<u64> {
        fn walk(block: &Block, out: &mut Vec<u64>) {
            for op in &block.ops {
                if let OpKind::Constant(Literal::Float(f)) = op.kind {
                    out.push(f.to_bits());
                }
                for nested in op.kind.blocks() {
                    walk(nested, out);
                }
            }
        }
        let mut out = Vec::new();
        walk(&k.body, &mut out);
        out
    }

    /// Replaces NaN literals (never equal to themselves) by a marker for `==`.
    fn without_nans(mut k: Kernel) -> Kernel {
        fn walk(block: &mut Block) {
            for op in &mut block.ops {
                if let OpKind::Constant(Literal::Float(f)) = &mut op.kind {
                    if f.is_nan() {
                        *f = 42.0;
                    }
                }
                for nested in op.kind.blocks_mut() {
                    walk(nested);
                }
            }
        }
        walk(&mut k.body);
        k
    }

    #[test]
    fn every_op_round_trips() {
        let kernel = kitchen_sink();
        let text = print(&kernel);
        let parsed = match parse(&text) {
            Ok(k) => k,
            Err(e) => panic!("{e}\n{text}"),
        };
        assert_eq!(float_bits(&parsed), float_bits(&kernel));
        assert_eq!(without_nans(parsed), without_nans(kernel.clone()));
        assert_eq!(kernel.to_string(), text);
    }

    /// So that `every_op_round_trips` covers every mnemonic of the op table.
    #[test]
    fn kitchen_sink_has_every_op_code() {
        fn walk(block: &Block, seen: &mut HashSet<OpCode>) {
            for op in &block.ops {
                seen.insert(op.kind.code());
                assert_eq!(
                    op.kind.effects().regions,
                    !op.kind.blocks().is_empty(),
                    "{}",
                    op.kind.mnemonic()
                );
                for nested in op.kind.blocks() {
                    walk(nested, seen);
                }
            }
        }
        let mut seen = HashSet::new();
        walk(&kitchen_sink().body, &mut seen);
        let missing: Vec<OpCode> = OpCode::all().filter(|c| !seen.contains(c)).collect();
        assert!(missing.is_empty(), "not in the kitchen sink: {missing:?}");
    }

    #[test]
    fn text_reads_like_mlir() {
        let text = print(&kitchen_sink());
        assert!(text.contains("  %"), "{text}");
        assert!(
            text.contains(" = add %") && text.contains(" : tensor<8xi32>  // line 13:0"),
            "{text}"
        );
        assert!(text.contains("  value %3 : tensor<3x5xf16>\n"), "{text}");
        assert!(
            text.contains("  value %4 : tensor<2xptr<f16, shared>>\n"),
            "{text}"
        );
        for ty in [
            "smem<64x32xbf16, buffers 3, swizzle 128b, immutable>",
            "barriers<4>",
            "smem<32x64xbf16, buffers 1, swizzle 64b, mutable, transposed, remote>",
            "barriers<1, remote>",
            "tensordesc<128x64xf8e4m3>",
            "token",
        ] {
            assert!(text.contains(&format!(" : {ty}\n")), "{ty}: {text}");
        }
        assert!(text.contains("constant -0.0 "), "{text}");
        assert!(text.contains("constant nan:0x7ff8000000001234 "), "{text}");
        assert!(text.contains("    ^(%"), "{text}");
        assert!(text.contains("} else {"), "{text}");
        assert!(text.contains("} do {"), "{text}");
        assert!(
            text.contains(
                "  async_tasks {  // line 30:4\n    task default num_regs 240 {\n      %"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "    task num_warps 2 num_regs 24 replicate 2 start_warp 8 shared_body {\n    }\n  }\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn builder_test_kernel_round_trips() {
        let mut b = Builder::new("k", KernelOptions::default());
        b.add_param("out", ParamKind::Ptr(ScalarType::I32));
        let k = b.finish();
        assert_eq!(parse(&print(&k)), Ok(k));
    }

    fn error_line(text: &str) -> usize {
        match parse(text) {
            Ok(k) => panic!("parsed malformed text as {k:?}"),
            Err(e) => e.line,
        }
    }

    #[test]
    fn malformed_text_is_an_error_with_its_line() {
        let good = "kernel \"k\" {\n  source \"\"\n  options num_warps 4 num_stages 3\n  param \"p\" %0 i32\n  %1 = add %0, %0 : i32\n}\n";
        assert!(parse(good).is_ok());
        assert_eq!(error_line(&good.replace("add", "frobnicate")), 5);
        assert_eq!(error_line(&good.replace("%0, %0", "%0, %7")), 5);
        assert_eq!(error_line(&good.replace(" : i32\n}", " : i3\n}")), 5);
        assert_eq!(error_line(&good.replace("%1 =", "%0 =")), 5);
        assert_eq!(error_line(&good.replace("%1 =", "%5 =")), 5);
        assert_eq!(error_line(&good.replace("num_warps 4", "num_warps -4")), 3);
        assert_eq!(error_line(&good.replace("\"p\"", "\"p")), 4);
        assert_eq!(error_line(&good.replace("}\n", "")), 6);
        assert_eq!(error_line(""), 1);
        assert_eq!(error_line("kernel"), 1);
    }

    #[test]
    fn parsing_never_panics_on_truncated_or_mangled_text() {
        let text = print(&kitchen_sink());
        let chars: Vec<(usize, char)> = text.char_indices().collect();
        for (i, _) in chars.iter().step_by(7) {
            let prefix = &text[..*i];
            assert!(prefix.trim_end() == text.trim_end() || parse(prefix).is_err());
        }
        for (i, c) in chars.iter().step_by(11) {
            let mut mangled = text.clone();
            let replacement = if *c == '%' { "#" } else { "%9x" };
            mangled.replace_range(*i..*i + c.len_utf8(), replacement);
            let _ = parse(&mangled);
        }
        let deep = format!(
            "kernel \"k\" {{\n  param \"c\" %0 bool\n{}",
            "  if %0 {\n".repeat(MAX_BLOCK_DEPTH + 5)
        );
        assert!(parse(&deep).is_err());
    }
}
