use super::*;

fn batch(producer_id: i64, epoch: i16, first: i32, count: i32, base_offset: i64) -> ProducerBatch {
    ProducerBatch {
        producer_id,
        epoch,
        first_sequence: first,
        last_sequence: add_sequence(first, count - 1),
        base_offset,
        last_offset: base_offset + i64::from(count) - 1,
        max_timestamp: 1,
        transactional: false,
    }
}

fn admit(table: &mut ProducerStateTable, b: ProducerBatch) -> Result<Admission, LogError> {
    let admission = table.check("t-0", &[Some(b)])?;
    if let Admission::Append(batches) = &admission {
        table.apply(batches, 0);
    }
    Ok(admission)
}

#[test]
fn a_sequence_at_or_before_another_looks_back_half_the_space() {
    assert!(at_or_before(i32::MAX, 2));
    assert!(!at_or_before(3, i32::MAX));
    assert!(at_or_before(7, 7));
    assert!(!at_or_before(8, 7));
}

#[test]
fn an_unknown_producer_may_start_at_any_sequence() {
    let mut table = ProducerStateTable::new();
    assert!(matches!(
        admit(&mut table, batch(1, 3, 500, 2, 0)),
        Ok(Admission::Append(_))
    ));
    assert!(matches!(
        admit(&mut table, batch(1, 3, 502, 1, 2)),
        Ok(Admission::Append(_))
    ));
    assert_eq!(table.epoch(1), Some(3));
    assert_eq!(table.max_producer_id(), 1);
}

#[test]
fn each_of_the_last_five_batches_is_a_duplicate_with_its_offsets_and_older_ones_are_46() {
    let mut table = ProducerStateTable::new();
    for i in 0..7 {
        admit(&mut table, batch(9, 0, i * 2, 2, i64::from(i) * 2)).unwrap();
    }
    for i in 2..7 {
        match admit(&mut table, batch(9, 0, i * 2, 2, 999)).unwrap() {
            Admission::Duplicate {
                base_offset,
                last_offset,
            } => assert_eq!(
                (base_offset, last_offset),
                (i64::from(i) * 2, i64::from(i) * 2 + 1)
            ),
            Admission::Append(_) => panic!("batch {i} appended twice"),
        }
    }
    let error = admit(&mut table, batch(9, 0, 2, 2, 999)).unwrap_err();
    assert!(
        matches!(error, LogError::DuplicateSequence { .. }),
        "{error}"
    );
}

#[test]
fn a_gap_a_partial_overlap_and_a_new_epoch_not_at_zero_are_out_of_order() {
    let mut table = ProducerStateTable::new();
    admit(&mut table, batch(4, 1, 0, 5, 0)).unwrap();
    for bad in [
        batch(4, 1, 6, 1, 9),
        batch(4, 1, 3, 4, 9),
        batch(4, 2, 1, 1, 9),
    ] {
        let error = admit(&mut table, bad).unwrap_err();
        assert!(
            matches!(error, LogError::OutOfOrderSequence { .. }),
            "{error}"
        );
    }
    assert!(matches!(
        admit(&mut table, batch(4, 2, 0, 1, 5)),
        Ok(Admission::Append(_))
    ));
    let error = admit(&mut table, batch(4, 1, 5, 1, 6)).unwrap_err();
    assert!(
        matches!(
            error,
            LogError::InvalidProducerEpoch {
                current_epoch: 2,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn a_batch_crossing_i32_max_continues_at_the_wrapped_sequence() {
    let mut table = ProducerStateTable::new();
    admit(&mut table, batch(2, 0, i32::MAX - 1, 4, 0)).unwrap();
    assert!(matches!(
        admit(&mut table, batch(2, 0, 2, 1, 4)),
        Ok(Admission::Append(_))
    ));
    let error = admit(&mut table, batch(2, 0, i32::MAX - 3, 1, 5)).unwrap_err();
    assert!(
        matches!(error, LogError::DuplicateSequence { .. }),
        "{error}"
    );
}

#[test]
fn batches_of_one_buffer_see_each_other_and_a_mixed_resend_is_refused() {
    let mut table = ProducerStateTable::new();
    admit(&mut table, batch(1, 0, 0, 2, 0)).unwrap();
    let both = [Some(batch(1, 0, 2, 2, 2)), None, Some(batch(1, 0, 4, 1, 5))];
    let Admission::Append(applied) = table.check("t-0", &both).unwrap() else {
        panic!("new batches are appended");
    };
    assert_eq!(applied.len(), 2);
    let gap = [Some(batch(1, 0, 2, 2, 2)), Some(batch(1, 0, 5, 1, 4))];
    assert!(matches!(
        table.check("t-0", &gap),
        Err(LogError::OutOfOrderSequence { .. })
    ));
    let mixed = [Some(batch(1, 0, 0, 2, 7)), Some(batch(1, 0, 2, 2, 9))];
    assert!(matches!(
        table.check("t-0", &mixed),
        Err(LogError::InvalidBatch(_))
    ));
    // Nothing of the refused checks stuck.
    assert_eq!(table.batches(1).len(), 1);
}

#[test]
fn idle_producers_expire_and_the_limit_forgets_the_least_recent() {
    let mut table = ProducerStateTable::new();
    table.apply(&[batch(1, 0, 0, 1, 0)], 0);
    table.apply(&[batch(2, 0, 0, 1, 1)], PRODUCER_EXPIRATION_MS);
    assert_eq!(
        table.expire(PRODUCER_EXPIRATION_MS, PRODUCER_EXPIRATION_MS, |_| false),
        1
    );
    assert_eq!(table.epoch(1), None);
    assert_eq!(table.epoch(2), Some(0));
    assert_eq!(table.max_producer_id(), 2);

    let mut table = ProducerStateTable::new();
    let many: Vec<_> = (0..=PRODUCERS_PER_PARTITION_MAX as i64)
        .map(|id| batch(id, 0, 0, 1, id))
        .collect();
    table.apply(&many, 0);
    table.enforce_limit(|_| false);
    assert_eq!(table.len(), PRODUCERS_PER_PARTITION_MAX);
    assert_eq!(
        table.epoch(0),
        None,
        "the producer with the oldest batch goes"
    );
}

#[test]
fn a_producer_with_a_transaction_open_is_neither_expired_nor_dropped_over_the_limit() {
    let mut table = ProducerStateTable::new();
    table.apply(&[batch(1, 0, 0, 1, 0), batch(2, 0, 0, 1, 1)], 0);
    let in_transaction = |id: i64| id == 1;
    let later = 10 * PRODUCER_EXPIRATION_MS;
    assert_eq!(
        table.expire(later, PRODUCER_EXPIRATION_MS, in_transaction),
        1
    );
    assert_eq!(table.epoch(1), Some(0), "in a transaction: kept");
    assert_eq!(table.epoch(2), None, "idle between transactions: forgotten");

    // Over the limit, the oldest producer outside a transaction goes,
    // however old the one in a transaction is.
    let many: Vec<_> = (2..=PRODUCERS_PER_PARTITION_MAX as i64 + 1)
        .map(|id| batch(id, 0, 0, 1, id))
        .collect();
    table.apply(&many, 0);
    table.enforce_limit(in_transaction);
    assert_eq!(table.len(), PRODUCERS_PER_PARTITION_MAX);
    assert_eq!(table.epoch(1), Some(0));
    assert_eq!(table.epoch(2), None);
    assert_eq!(table.epoch(3), Some(0));
    // All in transactions: none goes, the limit is passed.
    table.apply(&[batch(10_000_000, 0, 0, 1, 9)], 0);
    table.enforce_limit(|_| true);
    assert_eq!(table.len(), PRODUCERS_PER_PARTITION_MAX + 1);
}
