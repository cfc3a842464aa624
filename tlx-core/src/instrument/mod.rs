//! Instrumentation: passes that rewrite a kernel so that it checks itself
//! while it runs, on the GPU and in the interpreter alike. Debug modes, off
//! unless asked for; a kernel compiled without them is unchanged.

mod bounds;

pub use bounds::{
    instrument_bounds, length_param_name, BoundsFault, BoundsSite, FAULT_RECORD_PARAM,
    FAULT_RECORD_WORDS,
};
