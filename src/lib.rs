//! placeholder until the facade is written
