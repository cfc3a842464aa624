//! The primitive table's typing rules and TMA's helpers.
use super::tma::holds_block;
use super::*;
use crate::ir::{BarrierType, ScalarType, SharedMemoryType, Swizzle, TensorDescriptorType};

#[test]
fn mnemonics_are_unique() {
    for &p in Prim::ALL {
        assert_eq!(Prim::from_mnemonic(p.mnemonic()), Some(p));
    }
}

#[test]
fn typing_rules_accept_a_tma_load_and_reject_a_mismatched_buffer() {
    let desc = Type::TensorDescriptor(TensorDescriptorType::new(ScalarType::BF16, vec![128, 64]));
    let buf = |shape: Vec<usize>| {
        Type::SharedMemory(SharedMemoryType::new(
            ScalarType::BF16,
            shape,
            1,
            Swizzle::Bytes128,
            true,
        ))
    };
    let bar = Type::Barriers(BarrierType::new(1));
    let i32t = Type::scalar(ScalarType::I32);
    let good = buf(vec![128, 64]);
    let ok = [&desc, &good, &bar, &i32t, &i32t];
    assert_eq!(Prim::AsyncDescriptorLoad.check(&[], &ok, &[]), Ok(()));
    let bad = buf(vec![64, 64]);
    let err = Prim::AsyncDescriptorLoad
        .check(&[], &[&desc, &bad, &bar, &i32t, &i32t], &[])
        .expect_err("shapes differ");
    assert!(err.contains("does not hold"), "{err}");
    let err = Prim::AsyncDescriptorLoad
        .check(&[], &[&desc, &good, &bar, &i32t], &[])
        .expect_err("one offset short");
    assert!(err.contains("1 offsets for a 2-d"), "{err}");
    // A prefetch names the block the same way, with no buffer.
    let prefetch = Prim::AsyncDescriptorPrefetch;
    assert_eq!(prefetch.check(&[], &[&desc, &i32t, &i32t], &[]), Ok(()));
    let err = prefetch
        .check(&[], &[&desc, &i32t], &[])
        .expect_err("one offset short");
    assert!(err.contains("1 offsets for a 2-d"), "{err}");
    let err = prefetch
        .check(&[], &[&good, &i32t, &i32t], &[])
        .expect_err("a buffer is not a descriptor");
    assert!(err.contains("a tensor descriptor"), "{err}");
}

#[test]
fn async_dot_wants_matching_operands_and_an_f32_accumulator() {
    let smem = |shape: Vec<usize>| {
        Type::SharedMemory(SharedMemoryType::new(
            ScalarType::F16,
            shape,
            1,
            Swizzle::Bytes128,
            true,
        ))
    };
    let acc = Type::tensor(ScalarType::F32.into(), vec![64, 128]);
    let (a, b) = (smem(vec![64, 64]), smem(vec![64, 128]));
    assert_eq!(Prim::AsyncDot.check(&[], &[&a, &b, &acc], &[&acc]), Ok(()));
    let wrong_k = smem(vec![32, 128]);
    let err = Prim::AsyncDot
        .check(&[], &[&a, &wrong_k, &acc], &[&acc])
        .expect_err("K differs");
    assert!(err.starts_with("inner dimensions differ"), "{err}");
}

#[test]
fn remote_views_take_arrivals_and_stores_but_no_wait_or_load() {
    let bar = Type::Barriers(BarrierType::new(1));
    let bars = Type::Barriers(BarrierType::new(4));
    let i32t = Type::scalar(ScalarType::I32);
    let yes = Type::scalar(ScalarType::Bool);
    let peer_bar = Type::Barriers(BarrierType::new(1).to_remote());
    assert_eq!(
        Prim::RemoteView.check(&[], &[&bar, &i32t], &[&peer_bar]),
        Ok(())
    );
    let err = Prim::RemoteView
        .check(&[], &[&bars, &i32t], &[&peer_bar])
        .expect_err("all four barriers");
    assert!(err.contains("pick one"), "{err}");
    assert_eq!(
        Prim::BarrierArrive.check(&[1], &[&peer_bar, &yes], &[]),
        Ok(())
    );
    let err = Prim::BarrierWait
        .check(&[], &[&peer_bar, &i32t, &yes], &[])
        .expect_err("no remote wait");
    assert!(err.contains("cannot take a remote view"), "{err}");
    let buf = SharedMemoryType::new(ScalarType::F32, vec![64], 1, Swizzle::None, true);
    let peer_buf = Type::SharedMemory(buf.to_remote());
    let tile = Type::tensor(ScalarType::F32.into(), vec![64]);
    assert_eq!(
        Prim::RemoteShmemStore.check(&[], &[&peer_buf, &tile], &[]),
        Ok(())
    );
    assert_eq!(
        Prim::AsyncRemoteShmemStore.check(&[], &[&peer_buf, &tile, &peer_bar], &[]),
        Ok(())
    );
    let err = Prim::AsyncRemoteShmemStore
        .check(&[], &[&peer_buf, &tile, &bar], &[])
        .expect_err("the barrier must be the peer's");
    assert!(err.contains("remote view of one barrier"), "{err}");
    let err = Prim::LocalLoad
        .check(&[], &[&peer_buf], &[&tile])
        .expect_err("no remote load");
    assert!(err.contains("cannot take a remote view"), "{err}");
    let own = Type::SharedMemory(buf);
    let err = Prim::RemoteShmemStore
        .check(&[], &[&own, &tile], &[])
        .expect_err("a local destination");
    assert!(err.contains("writes a remote view"), "{err}");
}

#[test]
fn a_multicast_copy_takes_a_mask_before_its_offsets() {
    let desc = Type::TensorDescriptor(TensorDescriptorType::new(ScalarType::BF16, vec![64, 64]));
    let buf = Type::SharedMemory(SharedMemoryType::new(
        ScalarType::BF16,
        vec![64, 64],
        1,
        Swizzle::Bytes128,
        true,
    ));
    let bar = Type::Barriers(BarrierType::new(1));
    let i32t = Type::scalar(ScalarType::I32);
    let ok = [&desc, &buf, &bar, &i32t, &i32t, &i32t];
    assert_eq!(
        Prim::AsyncDescriptorLoadMulticast.check(&[], &ok, &[]),
        Ok(())
    );
    let peer_bar = Type::Barriers(BarrierType::new(1).to_remote());
    let err = Prim::AsyncDescriptorLoadMulticast
        .check(&[], &[&desc, &buf, &peer_bar, &i32t, &i32t, &i32t], &[])
        .expect_err("the barrier names every target's own");
    assert!(err.contains("cannot take a remote view"), "{err}");
}

#[test]
fn swizzle_follows_the_row_width() {
    assert_eq!(nvmma_swizzle(128), Swizzle::Bytes128);
    assert_eq!(nvmma_swizzle(64), Swizzle::Bytes64);
    assert_eq!(nvmma_swizzle(32), Swizzle::Bytes32);
    assert_eq!(nvmma_swizzle(16), Swizzle::None);
    assert_eq!(shared_swizzle(ScalarType::BF16, &[4, 64]), Swizzle::None);
    assert_eq!(shared_swizzle(ScalarType::F32, &[64]), Swizzle::None);
    assert_eq!(
        shared_swizzle(ScalarType::BF16, &[1, 1, 64, 128]),
        Swizzle::Bytes128
    );
}

#[test]
fn buffers_hold_blocks_with_leading_unit_dimensions_left_out() {
    assert!(holds_block(&[64, 128], &[1, 1, 64, 128]));
    assert!(holds_block(&[1, 64, 128], &[1, 1, 64, 128]));
    assert!(holds_block(&[64, 128], &[64, 128]));
    assert!(!holds_block(&[64, 128], &[2, 64, 128]));
    assert!(!holds_block(&[1, 64, 128], &[64, 128]));
    assert_eq!(without_leading_ones(&[1, 1, 1]), &[1]);
}

#[test]
fn wide_blocks_move_in_atom_wide_boxes() {
    let b = TmaBox::new(ScalarType::BF16, &[64, 256]);
    assert_eq!(
        (b.swizzle, b.box_shape.clone(), b.pieces),
        (Swizzle::Bytes128, vec![64, 64], 4)
    );
    let a = TmaBox::new(ScalarType::BF16, &[128, 64]);
    assert_eq!((a.box_shape.clone(), a.pieces), (vec![128, 64], 1));
    let v = TmaBox::new(ScalarType::F32, &[256]);
    assert_eq!(
        (v.swizzle, v.box_shape.clone(), v.pieces),
        (Swizzle::None, vec![256], 1)
    );
}

#[test]
fn store_reductions_round_trip_and_follow_the_ptx_type_table() {
    for (r, name) in StoreReduce::ALL {
        assert_eq!(StoreReduce::from_code(r.code()), Some(r));
        assert_eq!(r.name(), name);
    }
    assert_eq!(StoreReduce::from_code(7), None);
    assert_eq!(StoreReduce::from_code(-1), None);
    assert!(StoreReduce::Add.supports(ScalarType::F32));
    assert!(StoreReduce::Max.supports(ScalarType::BF16));
    assert!(!StoreReduce::Max.supports(ScalarType::F32));
    assert!(!StoreReduce::Add.supports(ScalarType::U8));
    assert!(!StoreReduce::Xor.supports(ScalarType::F16));
    let desc = Type::TensorDescriptor(TensorDescriptorType::new(ScalarType::F32, vec![16, 32]));
    let buf = Type::SharedMemory(SharedMemoryType::new(
        ScalarType::F32,
        vec![16, 32],
        1,
        shared_swizzle(ScalarType::F32, &[16, 32]),
        true,
    ));
    let i32_t = Type::scalar(ScalarType::I32);
    let operands = [&desc, &buf, &i32_t, &i32_t];
    let store = |r: StoreReduce| Prim::AsyncDescriptorStore.check(&[r.code()], &operands, &[]);
    assert_eq!(store(StoreReduce::Add), Ok(()));
    assert!(store(StoreReduce::Min).is_err_and(|e| e.contains("no `min` reduction of f32")));
}
