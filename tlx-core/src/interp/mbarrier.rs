//! The mbarrier state machine, following PTX `mbarrier` semantics: a phase
//! completes when its pending arrival count and its transaction count both
//! reach zero; the phase number then advances (flipping the parity bit that
//! `try_wait.parity` tests) and the arrival count resets to the init count.
//! The interpreter's barrier ops and its deadlock reports build on this.

use super::wait::WaitReason;

/// PTX limits the arrival count and the transaction count to 2^20 - 1.
pub const MAX_COUNT: u32 = (1 << 20) - 1;

/// Misuse of an mbarrier that PTX leaves undefined; the interpreter reports it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MBarrierError {
    #[error("mbarrier init count {count} must be between 1 and {MAX_COUNT}")]
    BadInitCount { count: u32 },
    #[error("{count} arrivals on an mbarrier phase that awaits only {pending} more")]
    TooManyArrivals { count: u32, pending: u32 },
    #[error("mbarrier transaction count would become {tx_count}, outside ±{MAX_COUNT}")]
    TxOutOfRange { tx_count: i64 },
}

/// One mbarrier object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MBarrier {
    expected_arrivals: u32,
    pending_arrivals: u32,
    /// Bytes announced by `expect_tx` in the current phase.
    expected_tx: i64,
    /// Bytes reported by `complete_tx` in the current phase.
    completed_tx: i64,
    /// The number of the current (incomplete) phase; phases before it completed.
    phase: u32,
}

impl MBarrier {
    /// `mbarrier.init` with `count` expected arrivals per phase.
    pub fn new(count: u32) -> Result<MBarrier, MBarrierError> {
        if count == 0 || count > MAX_COUNT {
            return Err(MBarrierError::BadInitCount { count });
        }
        Ok(MBarrier {
            expected_arrivals: count,
            pending_arrivals: count,
            expected_tx: 0,
            completed_tx: 0,
            phase: 0,
        })
    }

    /// The number of the current, incomplete phase (0 after init).
    pub fn phase(&self) -> u32 {
        self.phase
    }

    /// Whether the current phase has seen an arrival or transaction bytes.
    pub fn phase_started(&self) -> bool {
        self.pending_arrivals < self.expected_arrivals
            || self.expected_tx != 0
            || self.completed_tx != 0
    }

    fn tx_count(&self) -> i64 {
        self.expected_tx - self.completed_tx
    }

    fn check_tx(expected_tx: i64, completed_tx: i64) -> Result<(), MBarrierError> {
        let tx_count = expected_tx - completed_tx;
        if tx_count.abs() > i64::from(MAX_COUNT) {
            return Err(MBarrierError::TxOutOfRange { tx_count });
        }
        Ok(())
    }

    fn complete_phase_if_done(&mut self) {
        if self.pending_arrivals == 0 && self.tx_count() == 0 {
            self.phase = self.phase.wrapping_add(1);
            self.pending_arrivals = self.expected_arrivals;
            self.expected_tx = 0;
            self.completed_tx = 0;
        }
    }

    /// `mbarrier.arrive` of `count` arrivals; returns the phase arrived at
    /// (PTX's state token).
    pub fn arrive(&mut self, count: u32) -> Result<u32, MBarrierError> {
        if count == 0 || count > self.pending_arrivals {
            return Err(MBarrierError::TooManyArrivals {
                count,
                pending: self.pending_arrivals,
            });
        }
        let token = self.phase;
        self.pending_arrivals -= count;
        self.complete_phase_if_done();
        Ok(token)
    }

    /// `expect_tx`: the current phase also awaits `bytes` more transaction bytes.
    pub fn expect_tx(&mut self, bytes: u32) -> Result<(), MBarrierError> {
        let expected_tx = self.expected_tx + i64::from(bytes);
        Self::check_tx(expected_tx, self.completed_tx)?;
        self.expected_tx = expected_tx;
        Ok(())
    }

    /// `complete_tx`: `bytes` of an asynchronous copy landed. May complete
    /// the phase when every arrival is in (the async copy is the last event).
    pub fn complete_tx(&mut self, bytes: u32) -> Result<(), MBarrierError> {
        let completed_tx = self.completed_tx + i64::from(bytes);
        Self::check_tx(self.expected_tx, completed_tx)?;
        self.completed_tx = completed_tx;
        self.complete_phase_if_done();
        Ok(())
    }

    /// `mbarrier.try_wait.parity`: whether the latest phase with this parity
    /// completed, i.e. the current phase has the other parity. Right after
    /// init, parity 1 counts as completed (the phase "before" phase 0), which
    /// is why producers wait on an empty barrier with parity 1 first.
    pub fn try_wait_parity(&self, parity: u32) -> bool {
        self.phase & 1 != parity & 1
    }

    /// Why a `try_wait_parity(parity)` that returned false is waiting, for
    /// deadlock reports. `id` is the barrier's number in its program.
    pub fn wait_reason(&self, id: usize) -> WaitReason {
        WaitReason::MBarrier {
            barrier: id,
            phase: self.phase,
            arrivals: self.expected_arrivals - self.pending_arrivals,
            expected_arrivals: self.expected_arrivals,
            tx_bytes: self.completed_tx,
            expected_tx_bytes: self.expected_tx,
            skipped: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_count_must_be_in_range() {
        assert_eq!(
            MBarrier::new(0),
            Err(MBarrierError::BadInitCount { count: 0 })
        );
        assert!(MBarrier::new(MAX_COUNT).is_ok());
        assert!(MBarrier::new(MAX_COUNT + 1).is_err());
    }

    #[test]
    fn phase_completes_after_all_arrivals_and_resets_the_count() -> Result<(), MBarrierError> {
        let mut bar = MBarrier::new(2)?;
        assert!(!bar.try_wait_parity(0));
        assert!(
            bar.try_wait_parity(1),
            "the phase before phase 0 counts as done"
        );
        assert_eq!(bar.arrive(1)?, 0);
        assert!(!bar.try_wait_parity(0));
        assert_eq!(bar.arrive(1)?, 0);
        assert_eq!(bar.phase(), 1);
        assert!(bar.try_wait_parity(0));
        assert!(!bar.try_wait_parity(1));
        // The count reset: phase 1 again needs two arrivals.
        assert_eq!(bar.arrive(1)?, 1);
        assert_eq!(bar.phase(), 1);
        bar.arrive(1)?;
        assert_eq!(bar.phase(), 2);
        assert!(bar.try_wait_parity(1));
        Ok(())
    }

    #[test]
    fn transaction_bytes_hold_the_phase_until_they_land() -> Result<(), MBarrierError> {
        let mut bar = MBarrier::new(1)?;
        bar.expect_tx(16384)?;
        bar.arrive(1)?;
        assert_eq!(bar.phase(), 0, "arrivals alone do not complete the phase");
        bar.complete_tx(8192)?;
        assert_eq!(bar.phase(), 0);
        bar.complete_tx(8192)?;
        assert_eq!(bar.phase(), 1, "the last bytes complete it");
        // The transaction count starts from zero in the new phase.
        bar.arrive(1)?;
        assert_eq!(bar.phase(), 2);
        Ok(())
    }

    #[test]
    fn bytes_may_land_before_they_are_expected() -> Result<(), MBarrierError> {
        let mut bar = MBarrier::new(1)?;
        bar.complete_tx(64)?;
        assert_eq!(bar.phase(), 0);
        bar.expect_tx(64)?;
        bar.arrive(1)?;
        assert_eq!(bar.phase(), 1);
        Ok(())
    }

    #[test]
    fn misuse_is_an_error() -> Result<(), MBarrierError> {
        let mut bar = MBarrier::new(1)?;
        assert_eq!(
            bar.arrive(2),
            Err(MBarrierError::TooManyArrivals {
                count: 2,
                pending: 1
            })
        );
        assert!(bar.expect_tx(MAX_COUNT).is_ok());
        assert!(matches!(
            bar.expect_tx(1),
            Err(MBarrierError::TxOutOfRange { .. })
        ));
        assert_eq!(bar.phase(), 0, "failed operations change nothing");
        Ok(())
    }

    #[test]
    fn wait_reason_reports_progress_of_the_current_phase() -> Result<(), MBarrierError> {
        let mut bar = MBarrier::new(1)?;
        bar.arrive(1)?;
        bar.expect_tx(16384)?;
        assert_eq!(
            bar.wait_reason(2).to_string(),
            "mbarrier #2 phase 1: 0 of 1 arrivals, 0 of 16384 transaction bytes"
        );
        Ok(())
    }
}
