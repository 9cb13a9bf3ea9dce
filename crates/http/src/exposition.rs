//! Prometheus text exposition (format 0.0.4) written through
//! prometheus-client's encoder: every family with its `# HELP` and
//! `# TYPE`, label values escaped, counters named `…_total`, histogram
//! buckets cumulative with `+Inf`, `_sum` and `_count`.
//!
//! The values are read at each scrape from where the broker and the
//! runtime already keep them (atomics on their paths, the log, the task
//! board): an [`Exposition`] is a collector called per scrape, which writes
//! each family through [`Families`].

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeLabelSet, NoLabelSet,
    prometheus_text,
};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// The `Content-Type` of what [`Exposition::render`] writes.
pub const CONTENT_TYPE: &str = prometheus_text::CONTENT_TYPE;

/// What a component exposes: its families, written at each scrape.
pub struct Exposition {
    registry: Registry,
}

impl Exposition {
    /// An exposition whose families `collect` writes at each scrape.
    pub fn new(collect: impl Fn(&mut Families<'_>) -> fmt::Result + Send + Sync + 'static) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Collect(collect)));
        Self { registry }
    }

    /// The text a scraper reads.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if let Err(error) = prometheus_text::encode(&mut text, &self.registry) {
            // Writing into a String fails only if a family's values did.
            tracing::warn!("writing the metrics: {error}");
        }
        text
    }
}

struct Collect<F>(F);

impl<F> fmt::Debug for Collect<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Collect")
    }
}

impl<F> Collector for Collect<F>
where
    F: Fn(&mut Families<'_>) -> fmt::Result + Send + Sync + 'static,
{
    fn encode(&self, encoder: DescriptorEncoder<'_>) -> fmt::Result {
        (self.0)(&mut Families { encoder })
    }
}

/// One histogram's state: `buckets` are (upper bound, observations in that
/// bucket alone), in increasing order; the encoder makes them cumulative.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HistogramSample {
    pub sum: f64,
    pub count: u64,
    pub buckets: Vec<(f64, u64)>,
}

/// The families of one scrape, written in the order given. A family is
/// written with its HELP and TYPE even when it has no sample.
pub struct Families<'a> {
    encoder: DescriptorEncoder<'a>,
}

impl Families<'_> {
    /// A gauge without labels.
    pub fn gauge(&mut self, name: &str, help: &str, value: impl EncodeGaugeValue) -> fmt::Result {
        let mut metric = self
            .encoder
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        metric.encode_gauge(&value)
    }

    /// A gauge family: one sample per label set.
    pub fn gauges<L: EncodeLabelSet, V: EncodeGaugeValue>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (L, V)>,
    ) -> fmt::Result {
        let mut metric = self
            .encoder
            .encode_descriptor(name, help, None, MetricType::Gauge)?;
        for (labels, value) in samples {
            metric.encode_family(&labels)?.encode_gauge(&value)?;
        }
        Ok(())
    }

    /// A counter without labels; `name` ends in `_total`, as scrapers
    /// read it.
    pub fn counter(
        &mut self,
        name: &str,
        help: &str,
        value: impl EncodeCounterValue,
    ) -> fmt::Result {
        let mut metric =
            self.encoder
                .encode_descriptor(counter_base(name), help, None, MetricType::Counter)?;
        metric.encode_counter::<NoLabelSet, _, u64>(&value, None)
    }

    /// A counter family: one sample per label set; `name` ends in
    /// `_total`.
    pub fn counters<L: EncodeLabelSet, V: EncodeCounterValue>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (L, V)>,
    ) -> fmt::Result {
        let mut metric =
            self.encoder
                .encode_descriptor(counter_base(name), help, None, MetricType::Counter)?;
        for (labels, value) in samples {
            (metric.encode_family(&labels)?).encode_counter::<NoLabelSet, _, u64>(&value, None)?;
        }
        Ok(())
    }

    /// A histogram family: one histogram per label set.
    pub fn histograms<L: EncodeLabelSet>(
        &mut self,
        name: &str,
        help: &str,
        samples: impl IntoIterator<Item = (L, HistogramSample)>,
    ) -> fmt::Result {
        let mut metric = self
            .encoder
            .encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (labels, sample) in samples {
            metric
                .encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(sample.sum, sample.count, &sample.buckets, None)?;
        }
        Ok(())
    }
}

/// The encoder appends `_total` to a counter's name.
fn counter_base(name: &str) -> &str {
    debug_assert!(name.ends_with("_total"), "counter {name} ends in _total");
    name.strip_suffix("_total").unwrap_or(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_has_help_and_type_and_label_values_are_escaped() {
        let exposition = Exposition::new(|families| {
            families.counter("t_requests_total", "Requests served.", 3u64)?;
            families.gauges(
                "t_lag",
                "Records behind.",
                [([("group", "a\"b\\c\nd".to_string())], 7i64)],
            )?;
            families.histograms(
                "t_latency_seconds",
                "Time to answer.",
                [(
                    [("api", "Fetch")],
                    HistogramSample {
                        sum: 0.5,
                        count: 3,
                        buckets: vec![(0.1, 2), (1.0, 1)],
                    },
                )],
            )
        });
        let text = exposition.render();
        for family in ["t_requests_total", "t_lag", "t_latency_seconds"] {
            assert!(text.contains(&format!("# HELP {family} ")), "{text}");
            assert!(text.contains(&format!("# TYPE {family} ")), "{text}");
        }
        assert!(text.contains("t_requests_total 3\n"), "{text}");
        assert!(text.contains(r#"t_lag{group="a\"b\\c\nd"} 7"#), "{text}");
        assert!(
            text.contains(r#"t_latency_seconds_bucket{api="Fetch",le="1"} 3"#),
            "cumulative: {text}"
        );
        assert!(
            text.contains(r#"t_latency_seconds_bucket{api="Fetch",le="+Inf"} 3"#),
            "{text}"
        );
        assert!(
            text.contains(r#"t_latency_seconds_count{api="Fetch"} 3"#),
            "{text}"
        );
    }
}
