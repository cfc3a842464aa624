//! Asynchronous copies between their issue and their landing: a TMA load
//! reads global memory when issued, and its bytes reach the shared buffer
//! and complete on its mbarrier only when the scheduler lands it. Round
//! robin lands each copy before the next task step (an instant copy engine);
//! `TLX_SCHEDULE=random:<seed>` lands them in a seeded random order at
//! random points, so a kernel that reads before its barrier says the data
//! is there meets stale contents, and the race report names it.

use crate::ir::ScalarType;
use std::sync::Arc;

use super::error::{InterpError, Site};
use super::explore::{Access, Object};
use super::schedule::ProgramShared;
use super::value::Data;

/// A TMA load on its way into shared memory.
#[derive(Clone, Debug)]
pub(crate) struct InFlightCopy {
    /// The program's count of copies when this one was issued: its name
    /// in an explored schedule.
    pub(crate) seq: u64,
    pub(crate) alloc: usize,
    pub(crate) buffer: usize,
    /// The elements of the buffer a slice destination covers.
    pub(crate) window: Option<Arc<Vec<usize>>>,
    /// The box's contents, elements of `elem` (the destination view's,
    /// which may reinterpret the buffer's bytes); `None` in a skeleton run,
    /// which moves no data.
    pub(crate) data: Option<Data>,
    pub(crate) elem: ScalarType,
    pub(crate) barrier: usize,
    pub(crate) bytes: u32,
    /// The issuer's vector clock: what the copy's landing publishes.
    pub(crate) clock: Vec<u64>,
    /// Where it was issued, and by which task, for errors at landing.
    pub(crate) at: Site,
    pub(crate) task: String,
}

impl ProgramShared {
    /// Lands in-flight copy `index`: its bytes reach the buffer and complete
    /// on its barrier.
    pub(crate) fn land(&mut self, index: usize) -> Result<(), InterpError> {
        if index >= self.in_flight.len() {
            return Ok(());
        }
        let copy = self.in_flight.remove(index);
        let buffer = self.smem.buffer_id(copy.alloc, copy.buffer);
        for (object, access) in [
            (Object::ClusterMap, Access::Read),
            (Object::Buffer(buffer), Access::Write),
            (Object::MBarrier(copy.barrier), Access::Arrive),
        ] {
            self.footprint.touch(object, access);
        }
        // A copy into a program of the cluster that has already exited.
        if let Err(error) = self.cluster.check_landing(copy.alloc, copy.barrier) {
            return Err(InterpError::Remote {
                at: copy.at,
                task: copy.task,
                error: Box::new(error),
            });
        }
        let window = copy.window.as_deref().map(Vec::as_slice);
        let written = match copy.data {
            Some(data) => self
                .smem
                .write_as(copy.alloc, copy.buffer, window, copy.elem, data),
            None => self.smem.mark_written(copy.alloc, copy.buffer),
        };
        written.map_err(|fault| fault.at(copy.at.clone()))?;
        let Some(bar) = self.barriers.get_mut(copy.barrier) else {
            return Ok(());
        };
        let phase = bar.phase();
        self.clocks.publish(copy.barrier, phase, &copy.clock);
        bar.complete_tx(copy.bytes)
            .map_err(|error| InterpError::MBarrier {
                at: copy.at,
                task: copy.task,
                error,
            })?;
        if bar.phase() != phase {
            self.footprint
                .touch(Object::MBarrier(copy.barrier), Access::Write);
        }
        Ok(())
    }
}
