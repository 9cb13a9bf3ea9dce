//! The real-client compatibility suite: confluent-kafka and kcat
//! (librdkafka), kafka-python, aiokafka and kafkajs against `strata serve`,
//! and confluent-kafka's schema registry client against its registry.
//!
//! Every test starts its own broker on a free port with its own data
//! directory and drives one client through one scenario (`scenarios.rs`),
//! comparing what comes back byte for byte with what was sent. The clients
//! run as separate processes (`driver.rs`); `make deps` installs them
//! (scripts/install-clients.sh) and a missing one fails its tests with a
//! message saying so.
//!
//! Run one client's tests with `cargo test --test compat kafkajs::`, one
//! scenario for every client with `cargo test --test compat seek`.

#[path = "../support/mod.rs"]
mod support;

mod acls;
mod broker;
mod driver;
mod quix;
mod records;
mod rust_client;
mod scenarios;
mod schema_formats;
mod schema_registry;
mod transactions;
mod wire;

/// One test per scenario for a client: `tests!(Client; scenario(args), ...)`
/// makes `fn scenario()` calling `scenarios::scenario(client, args)`.
macro_rules! tests {
    ($client:expr; $($name:ident => $scenario:ident($($arg:expr),*)),* $(,)?) => {
        $(
            #[test]
            fn $name() {
                crate::scenarios::$scenario($client, $($arg),*);
            }
        )*
    };
}

/// The scenarios every client with a full consumer API runs.
macro_rules! common_tests {
    ($client:expr) => {
        tests! { $client;
            produce_acks_0 => produce_with_acks("0"),
            produce_acks_1 => produce_with_acks("1"),
            produce_acks_all => produce_with_acks("all"),
            produce_gzip => produce_with_codec("gzip"),
            produce_snappy => produce_with_codec("snappy"),
            produce_idempotent => produce_idempotent(),
            offsets_for_times_exact_to_the_record => offsets_for_times_exact_to_the_record(),
            seek_to_beginning_and_end => seek_to_beginning_and_end(),
        }
    };
}

/// Every scenario, for the clients that can run them all (every codec,
/// every reset policy, topic creation and groups).
macro_rules! full_client_tests {
    ($client:expr) => {
        common_tests!($client);
        tests! { $client;
            admin_creates_and_lists_topics => admin_creates_and_lists_topics(),
            produce_lz4 => produce_with_codec("lz4"),
            produce_zstd => produce_with_codec("zstd"),
            expired_offset_is_out_of_range => expired_offset_is_out_of_range(&["earliest", "latest", "none"]),
            group_splits_partitions_and_resumes_after_restart => group_splits_partitions_and_resumes_after_restart(),
        }
    };
}

mod confluent_kafka {
    use crate::driver::Client::ConfluentKafka as C;
    full_client_tests!(C);
}

mod kafka_python {
    use crate::driver::Client::KafkaPython as C;
    full_client_tests!(C);
}

mod aiokafka {
    use crate::driver::Client::Aiokafka as C;
    full_client_tests!(C);
}

/// kafkajs: gzip built in, snappy through kafkajs-snappy; no lz4 or zstd
/// (their codec packages build native code). Its consumer always joins a
/// group, has no reset policy that raises and shows no position, so the
/// out-of-range check is the `earliest` reset of an expired committed offset.
mod kafkajs {
    use crate::driver::Client::Kafkajs as C;
    common_tests!(C);
    tests! { C;
        admin_creates_and_lists_topics => admin_creates_and_lists_topics(),
        expired_offset_is_out_of_range => expired_offset_is_out_of_range(&["earliest"]),
        group_splits_partitions_and_resumes_after_restart => group_splits_partitions_and_resumes_after_restart(),
    }
}

/// kcat: no topic creation, no group scenario here (it is librdkafka, as
/// confluent-kafka is), no `latest` reset check (it shows no position).
mod kcat {
    use crate::driver::Client::Kcat as C;
    common_tests!(C);
    tests! { C;
        lists_topics => lists_topics_made_elsewhere(),
        produce_lz4 => produce_with_codec("lz4"),
        produce_zstd => produce_with_codec("zstd"),
        expired_offset_is_out_of_range => expired_offset_is_out_of_range(&["earliest", "none"]),
    }
}

/// Produced by one client, consumed by the next, around the ring of all
/// five, byte for byte.
mod cross_client {
    use crate::driver::Client::*;
    use crate::scenarios::PLAIN;
    tests! { ConfluentKafka;
        confluent_kafka_to_kafka_python => round_trip(KafkaPython, &PLAIN),
    }
    tests! { KafkaPython;
        kafka_python_to_aiokafka => round_trip(Aiokafka, &PLAIN),
    }
    tests! { Aiokafka;
        aiokafka_to_kafkajs => round_trip(Kafkajs, &PLAIN),
    }
    tests! { Kafkajs;
        kafkajs_to_kcat => round_trip(Kcat, &PLAIN),
    }
    tests! { Kcat;
        kcat_to_confluent_kafka => round_trip(ConfluentKafka, &PLAIN),
    }
}

/// strata's own client with the real ones: records both ways byte for byte
/// (librdkafka through confluent-kafka and kcat), key placement against
/// librdkafka's murmur2_random and kafka-python's murmur2, and a group
/// shared with kafka-python.
mod strata_client {
    use crate::driver::Client::*;
    use crate::rust_client::*;

    #[test]
    fn strata_to_confluent_kafka() {
        strata_client_to(ConfluentKafka);
    }

    #[test]
    fn strata_to_kcat() {
        strata_client_to(Kcat);
    }

    #[test]
    fn confluent_kafka_to_strata() {
        client_to_strata_client(ConfluentKafka);
    }

    #[test]
    fn kcat_to_strata() {
        client_to_strata_client(Kcat);
    }

    #[test]
    fn keys_land_where_librdkafka_puts_them() {
        keys_land_where_strata_puts_them(ConfluentKafka);
    }

    #[test]
    fn keys_land_where_kafka_python_puts_them() {
        keys_land_where_strata_puts_them(KafkaPython);
    }

    #[test]
    fn a_group_shared_with_kafka_python() {
        group_shared_with_kafka_python();
    }
}
