//! What a case of the broker benchmark is: its work (produce with which
//! acks, how many producers and in which mode, or consume), its record
//! size and its client; the label it is printed and filtered by, and the
//! order the cases run in.

/// Record sizes (value bytes) every case runs with.
pub const RECORD_SIZES: [usize; 2] = [100, 1024];
/// Concurrent producers of the group-commit case.
pub const CONCURRENT_PRODUCERS: usize = 8;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// `rdkafka_driver.c`: librdkafka fed from memory.
    Driver,
    /// kcat: librdkafka fed from a file it splits into lines.
    Kcat,
    /// `strata bench`: strata's own client, fed from memory.
    Strata,
    /// One produce request built before the run, sent again and again
    /// (see `prebuilt`): the broker's intake with no client work.
    Prebuilt,
    /// Each request's batch encoded anew, nothing else (see `prebuilt`):
    /// a plain producer.
    Plain,
}

impl Client {
    pub fn name(self) -> &'static str {
        match self {
            Client::Driver => "driver",
            Client::Kcat => "kcat",
            Client::Strata => "strata",
            Client::Prebuilt => "prebuilt",
            Client::Plain => "plain",
        }
    }

    /// Whether the client is librdkafka (the broker's targets are judged
    /// on these).
    pub fn is_librdkafka(self) -> bool {
        matches!(self, Client::Driver | Client::Kcat)
    }
}

/// How a producer writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Neither idempotent nor transactional.
    Plain,
    /// enable.idempotence (acks=all).
    Idempotent,
    /// A transactional producer committing every [`TRANSACTION_MS`].
    Transactions,
}

/// How long each transaction of the transactional cases lasts.
pub const TRANSACTION_MS: u64 = 100;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    Produce {
        acks: &'static str,
        producers: usize,
        mode: Mode,
    },
    /// Reads a topic written by a producer of mode `written`.
    Consume { written: Mode, read_committed: bool },
}

#[derive(Debug, Clone, Copy)]
pub struct Case {
    pub work: Work,
    pub record_bytes: usize,
    pub client: Client,
}

impl Case {
    pub fn label(&self) -> String {
        let size = match self.record_bytes {
            1024 => "1 KiB".to_string(),
            n => format!("{n} B"),
        };
        match self.work {
            Work::Produce {
                acks,
                producers,
                mode,
            } => {
                let how = match mode {
                    Mode::Plain if acks == "-1" => "acks=all".to_string(),
                    Mode::Plain => format!("acks={acks}"),
                    Mode::Idempotent => "idempotent".to_string(),
                    Mode::Transactions => format!("txn/{TRANSACTION_MS} ms"),
                };
                let who = if producers == 1 {
                    String::new()
                } else {
                    format!(", {producers} producers")
                };
                format!("produce {size} {how}{who}")
            }
            Work::Consume {
                written,
                read_committed,
            } => {
                let what = if written == Mode::Transactions {
                    " txn topic"
                } else {
                    ""
                };
                let how = if read_committed {
                    " read_committed"
                } else {
                    ""
                };
                format!("consume {size}{what}{how}")
            }
        }
    }
}

/// The cases in the order they run: producing first (each into a fresh
/// topic), then consuming a topic written for the purpose.
pub fn all_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for record_bytes in RECORD_SIZES {
        let produce = |acks, producers, mode, client| Case {
            work: Work::Produce {
                acks,
                producers,
                mode,
            },
            record_bytes,
            client,
        };
        cases.push(produce("1", 1, Mode::Plain, Client::Driver));
        cases.push(produce("1", 1, Mode::Plain, Client::Kcat));
        cases.push(produce("1", 1, Mode::Plain, Client::Strata));
        cases.push(produce("1", 1, Mode::Plain, Client::Plain));
        cases.push(produce("1", 1, Mode::Plain, Client::Prebuilt));
        cases.push(produce("-1", 1, Mode::Plain, Client::Driver));
        cases.push(produce("-1", 1, Mode::Plain, Client::Strata));
        let many = CONCURRENT_PRODUCERS;
        cases.push(produce("1", many, Mode::Plain, Client::Driver));
        cases.push(produce("-1", many, Mode::Plain, Client::Driver));
        cases.push(produce("-1", 1, Mode::Idempotent, Client::Driver));
        cases.push(produce("-1", 1, Mode::Transactions, Client::Driver));
    }
    for record_bytes in RECORD_SIZES {
        let consume = |written, read_committed, client| Case {
            work: Work::Consume {
                written,
                read_committed,
            },
            record_bytes,
            client,
        };
        for client in [Client::Driver, Client::Kcat, Client::Strata] {
            cases.push(consume(Mode::Plain, false, client));
        }
        cases.push(consume(Mode::Transactions, false, Client::Driver));
        cases.push(consume(Mode::Transactions, true, Client::Driver));
    }
    cases
}
