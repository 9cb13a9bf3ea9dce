//! Orders in the schema registry's formats: the same app three times over,
//! reading orders written as Avro, Protobuf and JSON Schema (by any
//! Confluent serializer, through `strata serve --schema-registry` or any
//! Confluent-compatible registry) and writing each customer's running
//! total in the same format, for any Confluent deserializer to read.
//!
//! ```text
//! strata serve --schema-registry 127.0.0.1:8081 &
//! # produce orders to orders-avro, orders-protobuf, orders-json with
//! # Confluent's serializers (keys: the customer, as a plain string)
//! cargo run --example schema_orders -- --bootstrap 127.0.0.1:9092 \
//!     --state-dir ./orders-state --schema-registry http://127.0.0.1:8081 run
//! strata consume customer-totals-avro --format avro --schema-registry http://127.0.0.1:8081
//! ```
//!
//! The Avro schema is the second version of `Order`: it added `note`, with
//! a default. Orders written with the first version are read through Avro's
//! schema resolution, `note` filled with its default.

use serde::{Deserialize, Serialize};
use strata::record::codec::Codec;
use strata::runtime::{App, Context, ProcessError, Record, Store, Topic};

const ORDER_AVRO: &str = r#"{"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": "string"},
    {"name": "amount", "type": "double"},
    {"name": "note", "type": ["null", "string"], "default": null}]}"#;

const TOTAL_AVRO: &str = r#"{"type": "record", "name": "CustomerTotal", "namespace": "shop", "fields": [
    {"name": "customer", "type": "string"},
    {"name": "orders", "type": "long"},
    {"name": "total", "type": "double"}]}"#;

const SHOP_PROTO: &str = r#"
syntax = "proto3";
package shop;
message Order { int64 id = 1; string customer = 2; double amount = 3; string note = 4; }
message CustomerTotal { string customer = 1; int64 orders = 2; double total = 3; }
"#;

const ORDER_JSON: &str = r#"{"title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "customer": {"type": "string"},
                   "amount": {"type": "number"}, "note": {"type": ["string", "null"]}},
    "required": ["id", "customer", "amount"]}"#;

const TOTAL_JSON: &str = r#"{"title": "CustomerTotal", "type": "object",
    "properties": {"customer": {"type": "string"}, "orders": {"type": "integer"},
                   "total": {"type": "number"}},
    "required": ["customer", "orders", "total"], "additionalProperties": false}"#;

/// An order, whichever format it came in.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Order {
    pub id: i64,
    pub customer: String,
    pub amount: f64,
    #[serde(default)]
    pub note: Option<String>,
}

/// A customer's orders so far and what they came to.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CustomerTotal {
    pub customer: String,
    pub orders: i64,
    pub total: f64,
}

/// One format's input, output and state.
struct Format {
    name: &'static str,
    orders: Topic<String, Order>,
    totals: Topic<String, CustomerTotal>,
    state: Store<String, CustomerTotal>,
}

const FORMATS: [Format; 3] = [
    Format {
        name: "avro",
        orders: Topic::new("orders-avro").codecs(Codec::Utf8, Codec::avro(ORDER_AVRO)),
        totals: Topic::new("customer-totals-avro").codecs(Codec::Utf8, Codec::avro(TOTAL_AVRO)),
        state: Store::new("avro-totals"),
    },
    Format {
        name: "protobuf",
        orders: Topic::new("orders-protobuf")
            .codecs(Codec::Utf8, Codec::protobuf(SHOP_PROTO, "Order")),
        totals: Topic::new("customer-totals-protobuf")
            .codecs(Codec::Utf8, Codec::protobuf(SHOP_PROTO, "CustomerTotal")),
        state: Store::new("protobuf-totals"),
    },
    Format {
        name: "json",
        orders: Topic::new("orders-json").codecs(Codec::Utf8, Codec::json_schema(ORDER_JSON)),
        totals: Topic::new("customer-totals-json")
            .codecs(Codec::Utf8, Codec::json_schema(TOTAL_JSON)),
        state: Store::new("json-totals"),
    },
];

/// Adds an order to its customer's total and writes the new total.
fn add(
    state: Store<String, CustomerTotal>,
    totals: Topic<String, CustomerTotal>,
) -> impl FnMut(Record<String, Order>, &mut Context) -> Result<(), ProcessError> + Clone + Send {
    move |order, ctx| {
        let mut total = ctx.get(state, &order.value.customer)?.unwrap_or_default();
        total.customer = order.value.customer.clone();
        total.orders += 1;
        total.total += order.value.amount;
        ctx.put(state, &order.value.customer, &total)?;
        ctx.emit(totals, &order.value.customer, &total)
    }
}

fn app() -> App {
    FORMATS.iter().fold(App::new("shop"), |app, format| {
        app.processor(format.name, add(format.state, format.totals))
            .input(format.orders)
            .store(format.state)
            .output(format.totals)
    })
}

fn main() -> std::process::ExitCode {
    strata::runtime::run_cli(app())
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata::testing::TestDriver;

    /// The driver gives the app a registry held in the process: each
    /// format's totals come out as the orders add up, through crashes.
    #[test]
    fn each_formats_totals_add_up_its_orders_through_a_crash() {
        let mut driver = TestDriver::new(app()).unwrap();
        for format in &FORMATS {
            driver.partitions(format.orders, 2).unwrap();
        }
        for id in 0..300 {
            let customer = format!("customer-{}", id % 3);
            let order = Order {
                id,
                customer: customer.clone(),
                amount: 1.5,
                note: None,
            };
            for format in &FORMATS {
                driver.pipe(format.orders, &customer, &order).unwrap();
            }
        }
        driver.crash_after(500).unwrap();
        driver.restart().unwrap();
        for format in &FORMATS {
            let totals = driver.output(format.totals).unwrap();
            let last = (totals.iter().rev())
                .find(|t| t.key.as_deref() == Some("customer-0"))
                .and_then(|t| t.value.clone())
                .unwrap();
            let expected = CustomerTotal {
                customer: "customer-0".into(),
                orders: 100,
                total: 150.0,
            };
            assert_eq!(last, expected, "{}", format.name);
            assert_eq!(totals.len(), 300, "{}: one total per order", format.name);
        }
        driver.assert_replay_matches();
    }
}
