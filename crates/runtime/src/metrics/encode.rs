//! OpenTelemetry metrics rendered as Prometheus text exposition format 0.0.4: dots become
//! underscores, the unit becomes a suffix (`ms` → `_milliseconds`, `s` → `_seconds`,
//! `{token}` → nothing), monotonic sums are counters named `_total`, other sums and gauges
//! are gauges, histograms give cumulative `_bucket{le=...}`, `_sum` and `_count`. The
//! resource (what the process is) becomes `target_info`, a gauge of 1 labelled with its
//! attributes (`service_name`, `service_instance_id`, `service_version`, ...).
use super::process::Plain;
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{
    AggregatedMetrics, Gauge, Histogram, Metric, MetricData, ResourceMetrics, Sum,
};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One metric family: its type, help text and sample lines.
struct Family {
    kind: &'static str,
    help: String,
    samples: String,
}

/// Renders every metric of `rm` and its `target_info`. Families come out sorted by name; a
/// second instrument that maps to a name already taken with another type is left out.
pub fn encode(rm: &ResourceMetrics) -> String {
    encode_with(rm, &[])
}

/// [`encode`] plus `plain` samples made elsewhere (the process's own), each a family of its
/// own unless an instrument took its name.
pub(crate) fn encode_with(rm: &ResourceMetrics, plain: &[Plain]) -> String {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for scope in rm.scope_metrics() {
        for metric in scope.metrics() {
            add_metric(&mut families, metric);
        }
    }
    target_info(&mut families, rm);
    for p in plain {
        if let Some(f) = family(&mut families, p.name, p.kind, p.help)
            && f.samples.is_empty()
        {
            sample(
                &mut f.samples,
                p.name,
                std::iter::empty(),
                None,
                &render_f64(p.value),
            );
        }
    }
    let mut out = String::new();
    for (name, family) in &families {
        if !family.help.is_empty() {
            let _ = writeln!(out, "# HELP {name} {}", escape_help(&family.help));
        }
        let _ = writeln!(out, "# TYPE {name} {}", family.kind);
        out.push_str(&family.samples);
    }
    out
}

/// `target_info 1`, labelled with the resource's attributes in key order (none: no family).
fn target_info(families: &mut BTreeMap<String, Family>, rm: &ResourceMetrics) {
    let mut attrs: Vec<KeyValue> = rm
        .resource()
        .iter()
        .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
        .collect();
    if attrs.is_empty() {
        return;
    }
    attrs.sort_by(|a, b| a.key.as_str().cmp(b.key.as_str()));
    if let Some(f) = family(families, "target_info", "gauge", "Target metadata")
        && f.samples.is_empty()
    {
        sample(&mut f.samples, "target_info", attrs.iter(), None, "1");
    }
}

fn add_metric(families: &mut BTreeMap<String, Family>, metric: &Metric) {
    let base = base_name(metric.name(), metric.unit());
    match metric.data() {
        AggregatedMetrics::F64(d) => add_data(families, &base, metric.description(), d),
        AggregatedMetrics::U64(d) => add_data(families, &base, metric.description(), d),
        AggregatedMetrics::I64(d) => add_data(families, &base, metric.description(), d),
    }
}

fn add_data<T: Number>(
    families: &mut BTreeMap<String, Family>,
    base: &str,
    help: &str,
    data: &MetricData<T>,
) {
    match data {
        MetricData::Gauge(g) => gauge(family(families, base, "gauge", help), base, g),
        MetricData::Sum(s) if s.is_monotonic() => {
            let name = format!("{base}_total");
            sum(family(families, &name, "counter", help), &name, s);
        }
        MetricData::Sum(s) => sum(family(families, base, "gauge", help), base, s),
        MetricData::Histogram(h) => histogram(family(families, base, "histogram", help), base, h),
        // Not configured anywhere in droidmesh; Prometheus text has no form for it.
        MetricData::ExponentialHistogram(_) => {}
    }
}

/// The family `name`, created on first use; `None` when it exists with another type.
fn family<'a>(
    families: &'a mut BTreeMap<String, Family>,
    name: &str,
    kind: &'static str,
    help: &str,
) -> Option<&'a mut Family> {
    let f = families.entry(name.to_owned()).or_insert_with(|| Family {
        kind,
        help: help.to_owned(),
        samples: String::new(),
    });
    (f.kind == kind).then_some(f)
}

fn gauge<T: Number>(family: Option<&mut Family>, name: &str, g: &Gauge<T>) {
    let Some(f) = family else { return };
    for p in g.data_points() {
        sample(
            &mut f.samples,
            name,
            p.attributes(),
            None,
            &p.value().render(),
        );
    }
}

fn sum<T: Number>(family: Option<&mut Family>, name: &str, s: &Sum<T>) {
    let Some(f) = family else { return };
    for p in s.data_points() {
        sample(
            &mut f.samples,
            name,
            p.attributes(),
            None,
            &p.value().render(),
        );
    }
}

fn histogram<T: Number>(family: Option<&mut Family>, name: &str, h: &Histogram<T>) {
    let Some(f) = family else { return };
    let bucket = format!("{name}_bucket");
    for p in h.data_points() {
        let mut cumulative = 0u64;
        let mut counts = p.bucket_counts();
        for bound in p.bounds() {
            cumulative += counts.next().unwrap_or(0);
            let le = render_f64(bound);
            sample(
                &mut f.samples,
                &bucket,
                p.attributes(),
                Some(&le),
                &cumulative.to_string(),
            );
        }
        sample(
            &mut f.samples,
            &bucket,
            p.attributes(),
            Some("+Inf"),
            &p.count().to_string(),
        );
        let sum_name = format!("{name}_sum");
        sample(
            &mut f.samples,
            &sum_name,
            p.attributes(),
            None,
            &p.sum().render(),
        );
        let count_name = format!("{name}_count");
        sample(
            &mut f.samples,
            &count_name,
            p.attributes(),
            None,
            &p.count().to_string(),
        );
    }
}

/// One sample line: `name{labels,le="..."} value`.
fn sample<'a>(
    out: &mut String,
    name: &str,
    attributes: impl Iterator<Item = &'a KeyValue>,
    le: Option<&str>,
    value: &str,
) {
    out.push_str(name);
    let mut labels: Vec<(String, String)> = Vec::new();
    for kv in attributes {
        let key = sanitize(kv.key.as_str());
        // Two attributes that sanitize alike: the first one is kept.
        if key == "le" || labels.iter().any(|(k, _)| *k == key) {
            continue;
        }
        labels.push((key, label_value(&kv.value)));
    }
    if let Some(le) = le {
        labels.push(("le".to_owned(), le.to_owned()));
    }
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let _ = write!(out, "{k}=\"{}\"", escape_label(v));
        }
        out.push('}');
    }
    out.push(' ');
    out.push_str(value);
    out.push('\n');
}

/// The Prometheus name of an instrument: sanitized, with its unit as a suffix.
pub(crate) fn base_name(name: &str, unit: &str) -> String {
    let mut base = sanitize(name);
    let suffix = match unit {
        "" | "1" => String::new(),
        "ms" => "milliseconds".to_owned(),
        "s" => "seconds".to_owned(),
        "us" => "microseconds".to_owned(),
        "ns" => "nanoseconds".to_owned(),
        "By" => "bytes".to_owned(),
        // Annotations such as `{token}` name what is counted, not a unit.
        u if u.starts_with('{') && u.ends_with('}') => String::new(),
        u => sanitize(u),
    };
    if !suffix.is_empty() && !base.ends_with(&format!("_{suffix}")) {
        base.push('_');
        base.push_str(&suffix);
    }
    base
}

/// Letters, digits and `_`; anything else becomes `_`, and a leading digit gets a `_` before it.
fn sanitize(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if out.is_empty() || out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

fn label_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.as_str().to_owned(),
        other => other.to_string(),
    }
}

/// Label values escape `\`, `"` and line feeds.
fn escape_label(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// Help text escapes `\` and line feeds.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

fn render_f64(v: f64) -> String {
    if v.is_nan() {
        "NaN".to_owned()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf" } else { "-Inf" }.to_owned()
    } else {
        v.to_string()
    }
}

/// The value types instruments record.
trait Number: Copy {
    fn render(self) -> String;
}

impl Number for f64 {
    fn render(self) -> String {
        render_f64(self)
    }
}

impl Number for u64 {
    fn render(self) -> String {
        self.to_string()
    }
}

impl Number for i64 {
    fn render(self) -> String {
        self.to_string()
    }
}

#[cfg(test)]
#[path = "encode_tests.rs"]
mod tests;
