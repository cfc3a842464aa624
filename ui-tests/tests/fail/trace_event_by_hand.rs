use tlx::prelude::*;

// `trace_event` is what the timelines' instrumentation inserts; a kernel
// asks for timelines instead (`timeline = true`, or TLX_TRACE at build time).
#[tlx::kernel(num_warps = 4)]
fn marks(out: Ptr<i64>) {
    trace_event(out, 0, 1, 0);
}

fn main() {}
