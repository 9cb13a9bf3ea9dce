//! Producer sequences: a batch's first record's number in its producer's
//! run of records to one partition, in the wrapping space `0..=i32::MAX`
//! (Kafka's rule: after `i32::MAX` comes 0). The producer stamps them, the
//! log checks them, the runtime restamps its outbox with them.

/// `sequence + increment` in the wrapping sequence space.
pub fn add_sequence(sequence: i32, increment: i32) -> i32 {
    if sequence > i32::MAX - increment {
        increment - (i32::MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_wrap_from_i32_max_to_zero() {
        assert_eq!(add_sequence(i32::MAX, 1), 0);
        assert_eq!(add_sequence(i32::MAX - 1, 3), 1);
        assert_eq!(add_sequence(5, 0), 5);
    }

    #[test]
    fn adding_wraps_as_masked_wrapping_addition_does() {
        for (sequence, increment) in [(0, 1), (i32::MAX, 1), (i32::MAX - 5, 10), (7, 100)] {
            let masked = sequence.wrapping_add(increment) & i32::MAX;
            assert_eq!(add_sequence(sequence, increment), masked);
        }
    }
}
