//! Triton's random numbers (`philox`, `randint4x`, `rand`, `randn`, ...) and
//! `umulhi` on the interpreter: Random123's published Philox-4x32-10
//! known-answer vectors, a Philox written here in plain Rust on fresh seeds
//! and offsets (bit-exact for the integers and `rand`, within the math
//! functions' accuracy for `randn`), and the distributions' moments. The same
//! kernels go through code generation and `ptxas`.

use tlx_core::interp::{run_kernel, ArgValue, HostMemory, InterpOptions};
use tlx_core::ir::Kernel;
use tlx_frontend::compile_str;

fn compile(src: &str) -> Kernel {
    match compile_str(src) {
        Ok(mut kernels) => kernels.remove(0),
        Err(e) => panic!("compile failed:\n{e}"),
    }
}

/// Runs `kernel` on one program with `out` (poisoned `words` 32-bit words)
/// first, then `scalars`; returns `out`'s words.
fn run(kernel: &Kernel, words: usize, scalars: &[ArgValue]) -> Vec<u32> {
    let mem = HostMemory::new();
    let out = mem.alloc(words * 4);
    mem.write(out, 0, &vec![0xa5; words * 4]).expect("poison");
    let mut args = vec![ArgValue::ptr(out)];
    args.extend_from_slice(scalars);
    run_kernel(kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
    let mut got = vec![0u8; words * 4];
    mem.read(out, 0, &mut got).expect("read back");
    got.chunks(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect()
}

fn fresh_seed() -> u64 {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(11, |d| d.as_nanos() as u64);
    println!("seed {seed}");
    seed
}

/// Philox-4x32 as Salmon et al. define it, independent of the kernel code.
fn philox(mut c: [u32; 4], mut k: [u32; 2], rounds: u32) -> [u32; 4] {
    for _ in 0..rounds {
        let p0 = u64::from(0xD251_1F53u32) * u64::from(c[0]);
        let p2 = u64::from(0xCD9E_8D57u32) * u64::from(c[2]);
        c = [
            (p2 >> 32) as u32 ^ c[1] ^ k[0],
            p2 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
        k = [
            k[0].wrapping_add(0x9E37_79B9),
            k[1].wrapping_add(0xBB67_AE85),
        ];
    }
    c
}

/// Triton's `uint_to_uniform_float` for one word, in f32 as the kernel does it.
fn uniform(x: u32) -> f32 {
    let x = x as i32;
    let magnitude = if x < 0 {
        x.wrapping_neg().wrapping_sub(1)
    } else {
        x
    };
    magnitude as f32 * 4.656_612_7e-10_f32
}

const KAT: &str = r#"
#[tlx::kernel(num_warps = 1)]
fn kat(out: Ptr<u32>, seed: i64, c0: u32, c1: u32, c2: u32, c3: u32) {
    let (a, b, c, d) = philox(seed, c0, c1, c2, c3);
    store(out, a);
    store(out + 1, b);
    store(out + 2, c);
    store(out + 3, d);
}
"#;

#[test]
fn philox_reproduces_random123s_known_answers() {
    let kernel = compile(KAT);
    // (counter, key, output) from Random123's kat_vectors.
    let vectors: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
        (
            [0; 4],
            [0; 2],
            [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
        ),
        (
            [0xffff_ffff; 4],
            [0xffff_ffff; 2],
            [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
        ),
        (
            [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
            [0xa409_3822, 0x299f_31d0],
            [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
        ),
    ];
    for (counter, key, want) in vectors {
        // The seed's low word is the first key word (Triton's split).
        let seed = (u64::from(key[1]) << 32 | u64::from(key[0])) as i64;
        let mut scalars = vec![ArgValue::i64(seed)];
        scalars.extend(counter.iter().map(|&c| ArgValue::u32(c)));
        assert_eq!(philox(counter, key, 10), want, "the test's own Philox");
        assert_eq!(
            run(&kernel, 4, &scalars),
            want,
            "counter {counter:x?} key {key:x?}"
        );
    }
}

const STREAMS: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn streams(out: Ptr<u32>, seed: i64, base: i32) {
    let i = arange(0, 512);
    let offsets = base + i;
    let (a, b, c, d) = randint4x(seed, offsets);
    store(out + i, a);
    store(out + 512 + i, b);
    store(out + 1024 + i, c);
    store(out + 1536 + i, d);
    store(out + 2048 + i, randint(seed, offsets, n_rounds = 7));
    store(out + 2560 + i, bitcast(rand(seed, offsets), u32));
    let (u0, u1, u2, u3) = rand4x(seed, offsets);
    store(out + 3072 + i, bitcast(u3, u32));
    store(out + 3584 + i, bitcast(randn(seed, offsets), u32));
    let (n0, n1, n2, n3) = randn4x(seed, offsets);
    store(out + 4096 + i, bitcast(n1, u32));
    store(out + 4608 + i, bitcast(n3, u32));
}
"#;

/// Box-Muller in f64 on the kernel's uniforms: (r cos, r sin).
fn normal_pair(a: u32, b: u32) -> (f64, f64) {
    let u1 = f64::from(uniform(a).max(1.0e-7));
    let th = std::f64::consts::TAU * f64::from(uniform(b));
    let r = (-2.0 * u1.ln()).sqrt();
    (r * th.cos(), r * th.sin())
}

#[test]
fn random_streams_match_a_plain_philox() {
    let kernel = compile(STREAMS);
    let seed = fresh_seed() as i64;
    let base = (fresh_seed() % (1 << 30)) as i32 - (1 << 29);
    let got = run(&kernel, 5120, &[ArgValue::i64(seed), ArgValue::i32(base)]);
    let key = [seed as u32, (seed as u64 >> 32) as u32];
    let f = |w: u32| f64::from(f32::from_bits(w));
    for i in 0..512 {
        let offset = base.wrapping_add(i as i32) as u32;
        let words = philox([offset, 0, 0, 0], key, 10);
        for (stream, &want) in words.iter().enumerate() {
            assert_eq!(
                got[stream * 512 + i],
                want,
                "randint4x word {stream}, offset {offset}"
            );
        }
        assert_eq!(
            got[2048 + i],
            philox([offset, 0, 0, 0], key, 7)[0],
            "7 rounds"
        );
        assert_eq!(got[2560 + i], uniform(words[0]).to_bits(), "rand");
        assert_eq!(
            got[3072 + i],
            uniform(words[3]).to_bits(),
            "rand4x's fourth"
        );
        // `log`, `sqrt`, `sin` and `cos` are correctly rounded f32 here.
        let close = |have: f64, want: f64| (have - want).abs() <= 1e-5 * want.abs().max(1.0);
        let (n0, n1) = normal_pair(words[0], words[1]);
        let (_, n3) = normal_pair(words[2], words[3]);
        assert!(
            close(f(got[3584 + i]), n0),
            "randn {} vs {n0}",
            f(got[3584 + i])
        );
        assert!(
            close(f(got[4096 + i]), n1),
            "randn4x's second {} vs {n1}",
            f(got[4096 + i])
        );
        assert!(
            close(f(got[4608 + i]), n3),
            "randn4x's fourth {} vs {n3}",
            f(got[4608 + i])
        );
    }
}

const SEEDS: &str = r#"
#[tlx::kernel(num_warps = 1)]
fn seeds(out: Ptr<u32>, small: i32, unsigned: u32) {
    let i = arange(0, 32);
    store(out + i, randint(small, i));
    store(out + 32 + i, randint(unsigned, i));
    store(out + 64 + i, randint(-5, i));
}
"#;

#[test]
fn seeds_widen_to_64_bits_as_triton_widens_them() {
    let kernel = compile(SEEDS);
    let (small, unsigned) = (
        -(fresh_seed() as i32 & 0x7fff_ffff) - 1,
        fresh_seed() as u32 | 1 << 31,
    );
    let got = run(
        &kernel,
        96,
        &[ArgValue::i32(small), ArgValue::u32(unsigned)],
    );
    for i in 0..32u32 {
        // A negative `i32` seed sign-extends; a `u32` one zero-extends.
        assert_eq!(
            got[i as usize],
            philox([i, 0, 0, 0], [small as u32, u32::MAX], 10)[0]
        );
        assert_eq!(
            got[32 + i as usize],
            philox([i, 0, 0, 0], [unsigned, 0], 10)[0]
        );
        assert_eq!(
            got[64 + i as usize],
            philox([i, 0, 0, 0], [-5i32 as u32, u32::MAX], 10)[0]
        );
    }
}

const MOMENTS: &str = r#"
#[tlx::kernel(num_warps = 4)]
fn moments(out: Ptr<u32>, seed: i32) {
    let i = arange(0, 4096);
    store(out + i, bitcast(rand(seed, i), u32));
    store(out + 4096 + i, bitcast(randn(seed, i), u32));
}
"#;

#[test]
fn uniform_and_normal_numbers_have_their_moments() {
    let kernel = compile(MOMENTS);
    let got = run(&kernel, 8192, &[ArgValue::i32(fresh_seed() as i32)]);
    let values: Vec<f64> = got.iter().map(|&w| f64::from(f32::from_bits(w))).collect();
    let (u, n) = values.split_at(4096);
    assert!(
        u.iter().all(|&x| (0.0..1.0).contains(&x)),
        "rand outside [0, 1)"
    );
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let var = |v: &[f64]| {
        let m = mean(v);
        v.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / v.len() as f64
    };
    // 4096 draws: the sample mean's standard error is 0.0045 (uniform) and
    // 0.016 (normal); the bounds are five of them.
    assert!((mean(u) - 0.5).abs() < 0.023, "uniform mean {}", mean(u));
    assert!(
        (var(u) - 1.0 / 12.0).abs() < 0.01,
        "uniform variance {}",
        var(u)
    );
    assert!(mean(n).abs() < 0.08, "normal mean {}", mean(n));
    assert!((var(n) - 1.0).abs() < 0.12, "normal variance {}", var(n));
}

const MULHI: &str = r#"
#[tlx::kernel(num_warps = 1)]
fn mulhi(out: Ptr<u32>, a: Ptr<u32>, b: Ptr<u32>, wa: Ptr<i64>, wb: Ptr<i64>) {
    let i = arange(0, 64);
    let (x, y) = (load(a + i), load(b + i));
    store(out + i, umulhi(x, y));
    let high = umulhi(bitcast(x, i32), bitcast(y, i32));
    store(out + 64 + i, bitcast(high, u32));
    let wide = umulhi(load(wa + i), load(wb + i));
    store(out + 128 + i, (wide & 0xffffffff).to(u32));
    store(out + 192 + i, (wide >> 32).to(u32));
}
"#;

#[test]
fn umulhi_is_the_high_half_of_the_wide_product() {
    let kernel = compile(MULHI);
    let mut state = fresh_seed() | 1;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let a: Vec<u32> = (0..64).map(|_| next() as u32).collect();
    let b: Vec<u32> = (0..64).map(|_| next() as u32).collect();
    let wa: Vec<i64> = (0..64).map(|_| next() as i64).collect();
    let wb: Vec<i64> = (0..64).map(|_| next() as i64).collect();
    let mem = HostMemory::new();
    let buffer = |bytes: Vec<u8>| {
        let id = mem.alloc(bytes.len());
        mem.write(id, 0, &bytes).expect("write");
        id
    };
    let out = buffer(vec![0xa5; 256 * 4]);
    let args = [
        ArgValue::ptr(out),
        ArgValue::ptr(buffer(a.iter().flat_map(|v| v.to_le_bytes()).collect())),
        ArgValue::ptr(buffer(b.iter().flat_map(|v| v.to_le_bytes()).collect())),
        ArgValue::ptr(buffer(wa.iter().flat_map(|v| v.to_le_bytes()).collect())),
        ArgValue::ptr(buffer(wb.iter().flat_map(|v| v.to_le_bytes()).collect())),
    ];
    run_kernel(&kernel, [1, 1, 1], &args, &mem, &InterpOptions::default()).expect("runs");
    let mut got = vec![0u8; 256 * 4];
    mem.read(out, 0, &mut got).expect("read back");
    let got: Vec<u32> = got
        .chunks(4)
        .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
        .collect();
    for i in 0..64 {
        let unsigned = ((u64::from(a[i]) * u64::from(b[i])) >> 32) as u32;
        let signed = ((i64::from(a[i] as i32) * i64::from(b[i] as i32)) >> 32) as u32;
        let wide = (i128::from(wa[i]) * i128::from(wb[i])) >> 64;
        assert_eq!(got[i], unsigned, "u32 {} * {}", a[i], b[i]);
        assert_eq!(got[64 + i], signed, "i32 {} * {}", a[i] as i32, b[i] as i32);
        assert_eq!(
            got[128 + i],
            wide as u32,
            "i64 {} * {} (low word)",
            wa[i],
            wb[i]
        );
        assert_eq!(
            got[192 + i],
            (wide >> 32) as u32,
            "i64 {} * {} (high word)",
            wa[i],
            wb[i]
        );
    }
}

#[test]
fn misuse_is_reported_with_a_hint() {
    let cases = [
        (
            "randint(1.5, arange(0, 32))",
            "the seed must be an integer scalar",
        ),
        (
            "randint(7, arange(0, 32).to(i64))",
            "random offsets must be 32-bit integers",
        ),
        (
            "randint(7, arange(0, 32), n_rounds = 0)",
            "`n_rounds` must be an integer from 1 to 64",
        ),
        (
            "umulhi(arange(0, 32).to(f32), 3.0)",
            "`umulhi` takes integers",
        ),
    ];
    for (call, message) in cases {
        let src = format!(
            "#[tlx::kernel]\nfn k(out: Ptr<u32>) {{ let i = arange(0, 32); store(out + i, {call}); }}"
        );
        let err = match compile_str(&src) {
            Ok(_) => panic!("`{call}` compiled"),
            Err(e) => e.to_string(),
        };
        assert!(err.contains(message), "`{call}`: {err}");
    }
}

mod codegen {
    use crate::codegen_common;
    use tlx_core::ir::Arch;

    /// `umulhi` is one `mul.hi`; the streams kernel assembles.
    #[test]
    fn philox_uses_mul_hi_and_assembles() {
        for src in [super::STREAMS, super::MULHI] {
            let kernel = super::compile(src);
            let ptx = tlx_codegen::compile(&kernel, Arch::Sm90a)
                .expect("compiles")
                .ptx;
            assert!(ptx.contains("mul.hi."), "no `mul.hi`:\n{ptx}");
            codegen_common::ptxas_verbose_if_found(&ptx);
        }
    }
}
