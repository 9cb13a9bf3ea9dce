//! Checkout analytics over three topics keyed by customer, written with
//! `strata-operators`, all in one processor whose tasks read their three
//! inputs in timestamp order:
//!
//! - `customers` (customer → JSON profile: tier) read as a table, each
//!   customer's profile changing over time;
//! - `orders` (customer → JSON order: id, amount in cents), each enriched
//!   with the customer's tier as it was at the order's time, into
//!   `orders-by-tier` (a stream–table join);
//! - the enriched orders summed per customer and minute, written once per
//!   minute when it closes (30 s of grace for late orders), into
//!   `spend-per-minute` (a windowed aggregate);
//! - each order with every payment (`payments`: customer → JSON payment)
//!   of its customer within 10 minutes of it, or, once none can come,
//!   alone, into `order-payments` (a left stream–stream join).
//!
//! The three topics must have the same partition count, keyed by customer
//! (partition i of each meets in one task), and the outputs keep the
//! customer as their key, so each output partition has one writer. Run it
//! over a backlog, again as a replay, or rebuild its stores: the answers
//! are the same, byte for byte (`tests/runtime/determinism.rs`).
//!
//! ```text
//! cargo run --example checkout -- --data-dir ./strata-data run --until-end
//! cargo run --example checkout -- --data-dir ./strata-data replay --version v2 --until-end
//! cargo run --example checkout -- --data-dir ./strata-data diff live v2
//! ```

use std::time::Duration;

use serde::{Deserialize, Serialize};
use strata::codec::Codec;
use strata::runtime::App;
use strata_operators::{JoinWindows, Pipeline, PipelineError, Topic, Tumbling, Windowed};

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Customer {
    tier: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    id: u64,
    amount_cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Payment {
    amount_cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct OrderWithTier {
    id: u64,
    amount_cents: u64,
    tier: Option<String>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Spend {
    start: i64,
    orders: u64,
    amount_cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct OrderPayment {
    order: u64,
    paid_cents: Option<u64>,
}

const CUSTOMERS: Topic<String, Customer> = Topic::new("customers").codecs(Codec::Raw, Codec::Json);
const ORDERS: Topic<String, Order> = Topic::new("orders").codecs(Codec::Raw, Codec::Json);
const PAYMENTS: Topic<String, Payment> = Topic::new("payments").codecs(Codec::Raw, Codec::Json);
const ORDERS_BY_TIER: Topic<String, OrderWithTier> =
    Topic::new("orders-by-tier").codecs(Codec::Raw, Codec::Json);
const SPEND: Topic<String, Spend> = Topic::new("spend-per-minute").codecs(Codec::Raw, Codec::Json);
const ORDER_PAYMENTS: Topic<String, OrderPayment> =
    Topic::new("order-payments").codecs(Codec::Raw, Codec::Json);

const MINUTE: Duration = Duration::from_secs(60);
const GRACE: Duration = Duration::from_secs(30);
const PAID_WITHIN: Duration = Duration::from_secs(10 * 60);

fn app() -> Result<App, PipelineError> {
    let pipeline = Pipeline::new("checkout");
    // Declared first: a profile and an order of the same millisecond meet
    // with the profile already in the table.
    let customers = pipeline.table(CUSTOMERS);
    let orders = pipeline.from(ORDERS).named("checkout");
    let payments = pipeline.from(PAYMENTS);
    let with_tier = orders.left_join(&customers, |_, order, customer: Option<Customer>| {
        OrderWithTier {
            id: order.id,
            amount_cents: order.amount_cents,
            tier: customer.map(|c| c.tier),
        }
    });
    with_tier.to(ORDERS_BY_TIER);
    with_tier
        .stored_as("spend")
        .window(Tumbling::of(MINUTE).grace(GRACE).emit_on_close())
        .aggregate(Spend::default, |spend, _, order| Spend {
            start: 0,
            orders: spend.orders + 1,
            amount_cents: spend.amount_cents + order.amount_cents,
        })
        .map(|window: Windowed<String>, spend| {
            let start = window.start;
            (window.key, Spend { start, ..spend })
        })
        .to(SPEND);
    orders
        .stored_as("payments")
        .left_join_window(
            &payments,
            JoinWindows::of(PAID_WITHIN),
            |_, order, payment| OrderPayment {
                order: order.id,
                paid_cents: payment.map(|p| p.amount_cents),
            },
        )
        .to(ORDER_PAYMENTS);
    pipeline.app()
}

strata::main!(app());
