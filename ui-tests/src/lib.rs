//! trybuild UI tests for the kernel language live in `tests/`.
