//! Why a load monitor's page gave no load: what [`CheckError::Load`](super::super::CheckError)
//! carries, and the text a reading's `last_error` and the logs show.

/// A page was fetched but holds no load value.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LoadReadError {
    #[error("the page is not UTF-8: {source}")]
    NotUtf8 { source: std::str::Utf8Error },
    #[error("an empty page, not nginx stub_status")]
    EmptyStubStatus,
    /// `start`: the page's first line, cut to 40 characters.
    #[error("not an nginx stub_status page: it starts with {start:?}, not \"Active connections:\"")]
    NotStubStatus { start: String },
    #[error("stub_status: active connections {count:?} is not a number")]
    StubStatusCount { count: String },
    /// A line of a Prometheus exposition page that does not parse; `reason` is the parser's.
    #[error("line {line}: {reason}")]
    Syntax { line: usize, reason: String },
    /// A sample with more labels than any exporter writes: the page is refused (see
    /// `prometheus::MAX_LABELS`).
    #[error("line {line}: more than {max} labels on one sample")]
    TooManyLabels { line: usize, max: usize },
    #[error(
        "line {line}: {metric} is a counter (a total since start), not a gauge of the current load"
    )]
    Counter { line: usize, metric: String },
    /// `selector`: the metric and labels asked for, as `metric{label="value",…}`.
    #[error("no sample of {selector}")]
    NoSample { selector: String },
    #[error(
        "{} samples of {selector} (lines {}): name the one with labels, or sum them with aggregate = \"sum\"",
        .lines.len(),
        joined(.lines)
    )]
    Ambiguous { selector: String, lines: Vec<usize> },
    #[error("{selector}: {reason}")]
    Value {
        selector: String,
        reason: BadLoadValue,
    },
}

/// A sample's value that is no load.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum BadLoadValue {
    #[error("the value is NaN")]
    NaN,
    #[error("the value is {value}")]
    Infinite { value: f64 },
    #[error("the value {value} is negative")]
    Negative { value: f64 },
}

fn joined(lines: &[usize]) -> String {
    let lines: Vec<String> = lines.iter().map(ToString::to_string).collect();
    lines.join(", ")
}
