//! Checked mode (`tlx_core::instrument`) on the interpreter: a rewritten
//! kernel computes what the original does, reports the first access outside
//! its buffer in the fault record, and suppresses it; pointers are followed
//! through loops, task regions and selects to the parameters they may reach.

use tlx_core::instrument::{instrument_bounds, BoundsFault};
use tlx_core::interp::{run_kernel, ArgValue, BufferId, HostMemory, InterpOptions};
use tlx_frontend::compile_str;

use crate::kernels::{fault_record, read_fault, run_checked_gemm, WS_GEMM};

#[test]
fn a_warp_specialized_gemm_is_unchanged_when_its_stores_fit() {
    let (m, n, k) = (80, 72, 40);
    let ((got, want, fault), sites) = run_checked_gemm(WS_GEMM, (m, n, k), m * n).expect("runs");
    assert_eq!(got, want);
    assert_eq!(fault, None);
    let stores: Vec<_> = sites.iter().filter(|s| s.access == "store").collect();
    assert_eq!(stores.len(), 1, "{sites:?}");
    assert_eq!(stores[0].params, ["c"]);
}

#[test]
fn a_store_past_a_short_output_is_caught_inside_a_task_region() {
    // `c` is said to hold one row fewer than the product: row 79 is outside.
    let (m, n, k) = (80, 72, 40);
    let ((got, want, fault), _) = run_checked_gemm(WS_GEMM, (m, n, k), (m - 1) * n).expect("runs");
    let fault = fault.expect("the last row is out of bounds");
    assert_eq!(fault.count, n as i64, "one row of lanes");
    assert_eq!(fault.program[0], 1, "row 79 is in the second row of tiles");
    assert_eq!(fault.byte_offset / 4 / n as i64, (m - 1) as i64);
    // The rows in bounds were stored; the last was not.
    assert_eq!(got[..(m - 1) * n], want[..(m - 1) * n]);
    assert!(got[(m - 1) * n..].iter().all(|v| v.is_nan()));
}

/// Runs `src` rewritten, on `buffers` (the pointer parameters' contents, in
/// order, each given with the length the kernel is told), then `scalars`.
fn run_checked(
    src: &str,
    buffers: &[(&[i32], usize)],
    scalars: &[ArgValue],
    grid: u32,
) -> (Vec<Vec<i32>>, Option<BoundsFault>, Vec<Vec<String>>) {
    let mut kernel = compile_str(src).expect("compiles").remove(0);
    let sites = instrument_bounds(&mut kernel);
    tlx_core::check::verify(&kernel).expect("the rewritten kernel verifies");
    let mem = HostMemory::new();
    let ids: Vec<BufferId> = buffers
        .iter()
        .map(|(data, _)| {
            let id = mem.alloc(4 * data.len());
            let bytes: Vec<u8> = data.iter().flat_map(|v| v.to_le_bytes()).collect();
            mem.write(id, 0, &bytes).expect("fresh buffer");
            id
        })
        .collect();
    let record = fault_record(&mem);
    let mut args: Vec<ArgValue> = ids.iter().map(|&id| ArgValue::ptr(id)).collect();
    args.extend_from_slice(scalars);
    args.extend(
        buffers
            .iter()
            .map(|(_, len)| ArgValue::i64(4 * *len as i64)),
    );
    args.push(ArgValue::ptr(record));
    run_kernel(
        &kernel,
        [grid, 1, 1],
        &args,
        &mem,
        &InterpOptions::default(),
    )
    .expect("runs");
    let contents = ids
        .iter()
        .zip(buffers)
        .map(|(&id, (data, _))| {
            let mut bytes = vec![0u8; 4 * data.len()];
            mem.read(id, 0, &mut bytes).expect("read back");
            bytes
                .chunks(4)
                .map(|w| i32::from_le_bytes([w[0], w[1], w[2], w[3]]))
                .collect()
        })
        .collect();
    let params = sites.into_iter().map(|s| s.params).collect();
    (contents, read_fault(&mem, record), params)
}

#[test]
fn a_pointer_chosen_between_two_buffers_is_checked_against_both() {
    let src = r#"
        #[tlx::kernel]
        fn pick(a: Ptr<i32>, b: Ptr<i32>, out: Ptr<i32>, from_b: i32) {
            let offs = arange(0, 16);
            let mut src = a + offs;
            if from_b != 0 {
                src = b + offs;
            }
            store(out + offs, load(src, mask = offs < 16, other = -7));
        }
    "#;
    let a: Vec<i32> = (100..116).collect();
    let b: Vec<i32> = (200..216).collect();
    let out = vec![-1; 16];
    let (got, fault, params) = run_checked(
        src,
        &[(&a, 16), (&b, 16), (&out, 16)],
        &[ArgValue::i32(1)],
        1,
    );
    assert_eq!(fault, None);
    assert_eq!(got[2], b);
    assert!(
        params.contains(&vec!["a".to_string(), "b".to_string()]),
        "{params:?}"
    );
    // `a` is said to hold 10 elements: lanes 10..16 are outside it (and `b`).
    let (got, fault, _) = run_checked(
        src,
        &[(&a, 10), (&b, 16), (&out, 16)],
        &[ArgValue::i32(0)],
        1,
    );
    let fault = fault.expect("a[10..] is outside");
    assert_eq!((fault.count, fault.element), (6, 10));
    assert_eq!(fault.byte_offset, 40, "from the start of `a`");
    assert_eq!(got[2][..10], a[..10]);
    assert_eq!(got[2][10..], [-7; 6], "suppressed lanes read `other`");
}

#[test]
fn an_out_of_bounds_compare_and_swap_leaves_memory_alone() {
    let src = r#"
        #[tlx::kernel]
        fn claim(slots: Ptr<i32>, n: i32) {
            let offs = program_id(0) * 8 + arange(0, 8);
            let old = atomic_cas(slots + offs, 0, offs + 1);
        }
    "#;
    let slots = vec![0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7, 7];
    // The kernel is told `slots` has 10 elements: lanes 10..16 are outside.
    let (got, fault, _) = run_checked(src, &[(&slots, 10)], &[ArgValue::i32(10)], 2);
    let fault = fault.expect("lanes 10.. are outside");
    assert_eq!(fault.count, 6);
    assert_eq!(fault.program, [1, 0, 0]);
    assert_eq!(got[0], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 7, 7]);
}
