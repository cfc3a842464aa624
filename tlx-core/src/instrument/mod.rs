//! Instrumentation: passes that rewrite a kernel so that it checks itself
//! while it runs, on the GPU and in the interpreter alike. Debug modes (bounds checks,
//! GPU timelines), off unless asked for; a kernel compiled without them is unchanged.

mod bounds;
mod timeline;

pub use bounds::{
    instrument_bounds, length_param_name, BoundsFault, BoundsSite, FAULT_RECORD_PARAM,
    FAULT_RECORD_WORDS,
};
pub use timeline::{
    decode as decode_timeline, instrument_timeline, SliceKind, TimedSlice, Timeline, TimelineSlice,
    HEADER_WORDS as TIMELINE_HEADER_WORDS, TIMELINE_BUFFER_PARAM, TIMELINE_CAPACITY_PARAM,
    TRAILER_WORDS as TIMELINE_TRAILER_WORDS,
};
pub use timeline::{
    words_left_free as timeline_words_left_free, CLOSING_WORDS as TIMELINE_CLOSING_WORDS,
};
