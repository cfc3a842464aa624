//! The runtime's on/off environment flags (`TLX_INTERPRET`,
//! `TLX_CHECK_UNINIT`): how a `TLX_*` variable reads as true.

/// True when the environment variable is set to `1`, `true` or `yes`.
pub(crate) fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| is_truthy(&v))
}

fn is_truthy(value: &str) -> bool {
    matches!(value.trim(), "1" | "true" | "yes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_flags_accept_common_spellings() {
        for on in ["1", "true", "yes", " 1\n"] {
            assert!(is_truthy(on), "{on:?}");
        }
        for off in ["", "0", "false", "no", "2"] {
            assert!(!is_truthy(off), "{off:?}");
        }
        assert!(!env_flag("TLX_TEST_FLAG_THAT_IS_NEVER_SET"));
    }
}
