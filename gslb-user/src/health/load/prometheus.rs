//! Prometheus text exposition (format 0.0.4, with the quoted names of Prometheus 3) and the
//! choice of one gauge in it.
//!
//! Every line is parsed, as Prometheus does when it scrapes: a malformed line anywhere makes
//! the whole page an error (with its line number), never a value read from a page we did not
//! understand.
//!
//! - Lines are separated by `\n`; empty lines and leading or trailing blanks are ignored.
//! - `# HELP name text` and `# TYPE name type` are checked; other `#` lines are comments.
//! - A sample is `name{label="value",…} value [timestamp]`: labels are optional, a trailing
//!   comma is allowed, blanks may separate the tokens. A name is `[a-zA-Z_:][a-zA-Z0-9_:]*`, a
//!   label name `[a-zA-Z_][a-zA-Z0-9_]*`, or either one quoted inside the braces
//!   (`{"name.x","label.y"="v"}`). Label values (and quoted names) escape `\\`, `\"` and `\n`;
//!   another escape is an error, as is a label given twice, or more than [`MAX_LABELS`]
//!   labels on one sample. The value is a float (`NaN`,
//!   `+Inf`, `-Inf` included); the timestamp, milliseconds, an integer.
//!
//! [`select`] picks the samples of one metric whose labels include every matcher (label =
//! value, exactly; other labels may be present; an empty value matches a sample without the
//! label too, since Prometheus makes no difference between the two). None is an error. Several are an error with
//! [`Aggregate::One`], since an under-specified matcher would otherwise read another
//! backend's load, and their sum with [`Aggregate::Sum`] (per-worker or per-listener gauges of
//! one service). A metric declared `counter` is refused: a total since start is not a load.
//! The value must be finite and not negative; it is rounded to the nearest integer.

use std::borrow::Cow;

use super::{Aggregate, BadLoadValue, LoadReadError, MAX_LOAD, PromSelector};

/// One sample line, decoded.
#[derive(Debug, PartialEq)]
struct Sample<'a> {
    name: Cow<'a, str>,
    labels: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    value: f64,
}

/// Reads the value `selector` picks from an exposition page.
pub(super) fn select(page: &str, selector: &PromSelector) -> Result<u64, LoadReadError> {
    let mut matched: Vec<(usize, f64)> = Vec::new();
    let mut counter_at = None;
    for (index, raw) in page.split('\n').enumerate() {
        let line_no = index + 1;
        let line = raw.trim_matches(BLANKS);
        let at = |reason: String| LoadReadError::Syntax {
            line: line_no,
            reason,
        };
        if line.is_empty() {
            continue;
        }
        if let Some(comment) = line.strip_prefix('#') {
            if let Some((name, kind)) = type_line(comment).map_err(at)?
                && name == selector.metric
                && kind == "counter"
            {
                counter_at = Some(line_no);
            }
            continue;
        }
        let sample = sample(line).map_err(|e| match e {
            LineError::Syntax(reason) => at(reason),
            LineError::TooManyLabels => LoadReadError::TooManyLabels {
                line: line_no,
                max: MAX_LABELS,
            },
        })?;
        if sample.name == selector.metric
            && selector.labels.iter().all(|(k, v)| {
                let value = sample.labels.iter().find(|(name, _)| name == k);
                value.map_or(v.is_empty(), |(_, value)| value == v)
            })
        {
            matched.push((line_no, sample.value));
        }
    }
    let wanted = || describe(selector);
    if let Some(line) = counter_at {
        return Err(LoadReadError::Counter {
            line,
            metric: selector.metric.clone(),
        });
    }
    let value = match (matched.as_slice(), selector.aggregate) {
        ([], _) => {
            return Err(LoadReadError::NoSample { selector: wanted() });
        }
        ([(_, v)], _) => *v,
        (many, Aggregate::One) => {
            return Err(LoadReadError::Ambiguous {
                selector: wanted(),
                lines: many.iter().map(|(l, _)| *l).collect(),
            });
        }
        (many, Aggregate::Sum) => many.iter().map(|(_, v)| v).sum(),
    };
    load_value(value).map_err(|reason| LoadReadError::Value {
        selector: wanted(),
        reason,
    })
}

/// A sample's value as a load: finite, not negative, rounded; at most [`MAX_LOAD`].
pub(super) fn load_value(value: f64) -> Result<u64, BadLoadValue> {
    if value.is_nan() {
        return Err(BadLoadValue::NaN);
    }
    if value.is_infinite() {
        return Err(BadLoadValue::Infinite { value });
    }
    if value < 0.0 {
        return Err(BadLoadValue::Negative { value });
    }
    // `as` saturates; MAX_LOAD keeps real loads apart from the unknown marker.
    Ok((value.round() as u64).min(MAX_LOAD))
}

/// `metric{label="value",…}` as the selector asks for it, for errors.
fn describe(selector: &PromSelector) -> String {
    if selector.labels.is_empty() {
        return selector.metric.clone();
    }
    let labels: Vec<String> = selector
        .labels
        .iter()
        .map(|(k, v)| format!("{k}={v:?}"))
        .collect();
    format!("{}{{{}}}", selector.metric, labels.join(","))
}

/// Labels on one sample, at most; a line with more fails the page
/// ([`LoadReadError::TooManyLabels`]). Real exporters write a handful (node_exporter's and
/// nginx's under 10, a histogram bucket with its target labels under 20), and the long-term
/// stores refuse series past about 30 by default (Cortex and Mimir:
/// `max_label_names_per_series = 30`); twice that leaves room for any real page and bounds a
/// line's work and memory, whatever a hostile backend sends.
pub(super) const MAX_LABELS: usize = 64;

/// Why one sample line does not parse.
#[derive(Debug)]
enum LineError {
    /// The reason, for [`LoadReadError::Syntax`].
    Syntax(String),
    /// More than [`MAX_LABELS`] labels.
    TooManyLabels,
}

impl From<String> for LineError {
    fn from(reason: String) -> Self {
        LineError::Syntax(reason)
    }
}

const BLANKS: &[char] = &[' ', '\t', '\r'];

/// A comment line's `(metric, type)` when it is a TYPE line; checks HELP and TYPE lines.
fn type_line(comment: &str) -> Result<Option<(Cow<'_, str>, &str)>, String> {
    let mut c = Cursor::new(comment);
    c.blanks();
    let keyword = c.take_while(|b| !is_blank(b));
    if keyword != "HELP" && keyword != "TYPE" {
        return Ok(None);
    }
    if !c.blanks() {
        return Err(format!("# {keyword} without a metric name"));
    }
    let name = if c.peek() == Some(b'"') {
        c.quoted()?
    } else {
        Cow::Borrowed(c.name(is_metric_start, is_metric_char, "metric name")?)
    };
    if keyword == "HELP" {
        // The text may be anything; its escapes are `\\` and `\n`.
        return Ok(None);
    }
    c.blanks();
    let kind = c.rest().trim_matches(BLANKS);
    match kind {
        "counter" | "gauge" | "histogram" | "summary" | "untyped" => Ok(Some((name, kind))),
        other => Err(format!("# TYPE {name}: unknown type {other:?}")),
    }
}

/// Decodes one sample line (not empty, not a comment, trimmed).
fn sample(line: &str) -> Result<Sample<'_>, LineError> {
    let mut c = Cursor::new(line);
    let mut name = None;
    if c.peek() != Some(b'{') {
        name = Some(Cow::Borrowed(c.name(
            is_metric_start,
            is_metric_char,
            "metric name",
        )?));
    }
    let mut labels: Vec<(Cow<'_, str>, Cow<'_, str>)> = Vec::new();
    if c.eat(b'{') {
        loop {
            c.blanks();
            if c.eat(b'}') {
                break;
            }
            let quoted = c.peek() == Some(b'"');
            let key = if quoted {
                c.quoted()?
            } else {
                Cow::Borrowed(c.name(is_label_start, is_label_char, "label name")?)
            };
            c.blanks();
            if quoted && name.is_none() && matches!(c.peek(), Some(b',' | b'}')) {
                // `{"metric.name", …}`: the quoted metric name comes first.
                name = Some(key);
            } else {
                if !c.eat(b'=') {
                    return Err(format!("label {key}: '=' expected").into());
                }
                c.blanks();
                if c.peek() != Some(b'"') {
                    return Err(format!("label {key}: a quoted value expected").into());
                }
                let value = c.quoted()?;
                // Checked before the label is kept: a bomb costs MAX_LABELS labels' work.
                if labels.len() == MAX_LABELS {
                    return Err(LineError::TooManyLabels);
                }
                labels.push((key, value));
            }
            c.blanks();
            if c.eat(b',') {
                continue;
            }
            if c.eat(b'}') {
                break;
            }
            return Err(String::from("',' or '}' expected after a label").into());
        }
    }
    // A label given twice: sorted, they are neighbours (k log k for k ≤ MAX_LABELS labels,
    // where comparing each label with those before it was k²: 10¹⁰ steps for one line of
    // 350,000 labels before the cap).
    let mut keys: Vec<&str> = labels.iter().map(|(k, _)| k.as_ref()).collect();
    keys.sort_unstable();
    let twice = keys.windows(2).find_map(|pair| match pair {
        [a, b] if a == b => Some(*a),
        _ => None,
    });
    if let Some(key) = twice {
        return Err(format!("label {key} given twice").into());
    }
    let Some(name) = name else {
        return Err(String::from("a sample without a metric name").into());
    };
    c.blanks();
    let value = c.take_while(|b| !is_blank(b));
    if value.is_empty() {
        return Err(format!("{name}: no value").into());
    }
    let value: f64 = value
        .parse()
        .map_err(|_| format!("{name}: value {value:?} is not a number"))?;
    c.blanks();
    let timestamp = c.take_while(|b| !is_blank(b));
    if !timestamp.is_empty() && timestamp.parse::<i64>().is_err() {
        return Err(
            format!("{name}: timestamp {timestamp:?} is not an integer (milliseconds)").into(),
        );
    }
    c.blanks();
    if !c.rest().is_empty() {
        return Err(format!("{name}: unexpected {:?} after the sample", c.rest()).into());
    }
    Ok(Sample {
        name,
        labels,
        value,
    })
}

fn is_blank(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

fn is_metric_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_' || b == b':'
}

fn is_metric_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':'
}

fn is_label_start(b: u8) -> bool {
    b.is_ascii_alphabetic() || b == b'_'
}

fn is_label_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// A position in one line.
struct Cursor<'a> {
    text: &'a str,
    at: usize,
}

impl<'a> Cursor<'a> {
    fn new(text: &'a str) -> Self {
        Cursor { text, at: 0 }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        if hit {
            self.at += 1;
        }
        hit
    }

    fn rest(&self) -> &'a str {
        &self.text[self.at..]
    }

    /// Skips blanks; true when there were any.
    fn blanks(&mut self) -> bool {
        !self.take_while(is_blank).is_empty()
    }

    /// The longest run of ASCII bytes for which `f` holds (never splits a UTF-8 character:
    /// `f` is only true for ASCII).
    fn take_while(&mut self, f: impl Fn(u8) -> bool) -> &'a str {
        let start = self.at;
        while self.peek().is_some_and(|b| b.is_ascii() && f(b)) {
            self.at += 1;
        }
        &self.text[start..self.at]
    }

    fn name(
        &mut self,
        start: fn(u8) -> bool,
        rest: fn(u8) -> bool,
        what: &str,
    ) -> Result<&'a str, String> {
        if !self.peek().is_some_and(start) {
            return Err(match self.peek() {
                None => format!("{what} expected"),
                Some(_) => format!(
                    "{what} expected at {:?}",
                    self.rest().chars().take(16).collect::<String>()
                ),
            });
        }
        Ok(self.take_while(rest))
    }

    /// A `"…"` string with the `\\`, `\"` and `\n` escapes; the cursor is on the opening quote.
    fn quoted(&mut self) -> Result<Cow<'a, str>, String> {
        debug_assert_eq!(self.peek(), Some(b'"'));
        self.at += 1;
        let start = self.at;
        let bytes = self.text.as_bytes();
        let mut owned: Option<String> = None;
        let mut run = start;
        loop {
            match bytes.get(self.at) {
                None => return Err("a quoted string is not closed".into()),
                Some(b'"') => {
                    let tail = &self.text[run..self.at];
                    self.at += 1;
                    return Ok(match owned {
                        None => Cow::Borrowed(tail),
                        Some(mut s) => {
                            s.push_str(tail);
                            Cow::Owned(s)
                        }
                    });
                }
                Some(b'\\') => {
                    let s = owned.get_or_insert_with(String::new);
                    s.push_str(&self.text[run..self.at]);
                    s.push(match bytes.get(self.at + 1) {
                        Some(b'\\') => '\\',
                        Some(b'"') => '"',
                        Some(b'n') => '\n',
                        Some(_) => {
                            let escape: String = self.text[self.at..].chars().take(2).collect();
                            return Err(format!("invalid escape {escape:?} in a quoted string"));
                        }
                        None => return Err("a quoted string is not closed".into()),
                    });
                    self.at += 2;
                    run = self.at;
                }
                Some(_) => self.at += 1,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(metric: &str, labels: &[(&str, &str)], aggregate: Aggregate) -> PromSelector {
        PromSelector {
            metric: metric.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).into(), (*v).into()))
                .collect(),
            aggregate,
        }
    }

    /// What real exporters write: HELP and TYPE, histograms, escapes, special values,
    /// timestamps, blank lines, names that share a prefix.
    const PAGE: &str = r#"# HELP backend_connections Open connections per pool.
# TYPE backend_connections gauge
backend_connections{pool="web",site="eu"} 17 1700000000000
backend_connections{pool="web",site="us"} 5
backend_connections{pool="api",site="eu",path="/a\"b\\c\nd"} 3.6
backend_connections_total{pool="web",site="eu"} 123456
# a free comment, then an empty line

# HELP requests_seconds Request latency with a "quoted" \\ help text.
# TYPE requests_seconds histogram
requests_seconds_bucket{le="0.1"} 10
requests_seconds_bucket{le="+Inf"} 12
requests_seconds_sum 1.5e+00
requests_seconds_count 12
idle_ratio NaN
peak +Inf -17
	 workers{ kind = "busy" , }	4
{"http.active", "pool.name"="web"} 9
"#;

    #[test]
    fn picks_the_matching_sample() {
        let one = Aggregate::One;
        let table: [(PromSelector, Result<u64, &str>); 12] = [
            (
                selector("backend_connections", &[("site", "us")], one),
                Ok(5),
            ),
            (
                selector(
                    "backend_connections",
                    &[("pool", "web"), ("site", "eu")],
                    one,
                ),
                Ok(17),
            ),
            // Escapes decoded before matching; 3.6 rounds to 4.
            (
                selector("backend_connections", &[("path", "/a\"b\\c\nd")], one),
                Ok(4),
            ),
            (
                selector("backend_connections", &[("pool", "web")], one),
                Err("2 samples of backend_connections{pool=\"web\"} (lines 3, 4)"),
            ),
            (
                selector("backend_connections", &[("pool", "web")], Aggregate::Sum),
                Ok(22),
            ),
            (
                selector("backend_connections", &[("site", "ap")], one),
                Err("no sample of backend_connections{site=\"ap\"}"),
            ),
            // Blanks and a trailing comma inside the braces.
            (selector("workers", &[("kind", "busy")], one), Ok(4)),
            (selector("http.active", &[("pool.name", "web")], one), Ok(9)),
            (selector("idle_ratio", &[], one), Err("the value is NaN")),
            // An empty value matches the samples without the label.
            (
                selector("backend_connections", &[("path", ""), ("site", "eu")], one),
                Ok(17),
            ),
            (selector("workers", &[("kind", "")], one), Err("no sample")),
            (selector("peak", &[], one), Err("the value is inf")),
        ];
        for (sel, want) in table {
            let got = select(PAGE, &sel);
            match (&got, want) {
                (Ok(v), Ok(w)) => assert_eq!(*v, w, "{sel:?}"),
                (Err(e), Err(w)) => assert!(e.to_string().contains(w), "{sel:?}: {e}"),
                _ => panic!("{sel:?}: {got:?}, want {want:?}"),
            }
        }
    }

    #[test]
    fn a_counter_is_not_a_load() {
        let page = "# TYPE conns counter\nconns 5\n";
        let err = select(page, &selector("conns", &[], Aggregate::One)).unwrap_err();
        assert!(
            err.to_string().contains("line 1: conns is a counter"),
            "{err}"
        );
        // Another metric's TYPE does not matter.
        let page = "# TYPE other counter\nother 1\nconns 5\n";
        assert_eq!(select(page, &selector("conns", &[], Aggregate::One)), Ok(5));
    }

    #[test]
    fn malformed_lines_fail_the_page_with_their_line() {
        let table = [
            (
                "conns{a=\"1\"} 1\nconns{b=\"2} 2\n",
                "line 2: a quoted string is not closed",
            ),
            ("conns{a=\"\\x\"} 1\n", "line 1: invalid escape \"\\\\x\""),
            ("conns{a=\"1\",a=\"2\"} 1\n", "line 1: label a given twice"),
            ("conns{a=1} 1\n", "line 1: label a: a quoted value expected"),
            ("conns{a \"1\"} 1\n", "line 1: label a: '=' expected"),
            ("conns{a=\"1\" b=\"2\"} 1\n", "',' or '}' expected"),
            ("conns\n", "line 1: conns: no value"),
            ("conns one\n", "value \"one\" is not a number"),
            ("conns 1 1.5\n", "timestamp \"1.5\" is not an integer"),
            ("conns 1 2 3\n", "unexpected \"3\" after the sample"),
            ("9conns 1\n", "metric name expected"),
            ("{a=\"1\"} 1\n", "a sample without a metric name"),
            (
                "# TYPE conns meter\nconns 1\n",
                "line 1: # TYPE conns: unknown type \"meter\"",
            ),
            ("# TYPE\n", "# TYPE without a metric name"),
            ("ok 1\n\n# HELP\n", "line 3: # HELP without a metric name"),
        ];
        for (page, want) in table {
            let got = select(page, &selector("conns", &[], Aggregate::One));
            assert!(
                got.as_ref().is_err_and(|e| e.to_string().contains(want)),
                "{page:?}: {got:?}, want {want:?}"
            );
        }
    }

    /// `name{l0="",l1="",…} 1`, with `count` labels, `l{dup}` again at the end if given.
    fn labelled(count: usize, dup: Option<usize>) -> String {
        let mut line = String::from("conns{");
        for i in 0..count {
            line.push_str(&format!("l{i}=\"\","));
        }
        if let Some(d) = dup {
            line.push_str(&format!("l{d}=\"x\""));
        }
        line.push_str("} 1\n");
        line
    }

    /// One line with 350,000 labels (4 MiB, the page limit): refused as a whole page at the
    /// first label over the cap, without looking at the rest (the duplicate check of a line
    /// is over at most `MAX_LABELS` labels).
    #[test]
    fn a_label_bomb_is_refused_at_the_cap() {
        let bomb = format!("ok 1\n{}", labelled(350_000, None));
        assert!(bomb.len() <= super::super::PAGE_LIMIT, "{}", bomb.len());
        assert_eq!(
            select(&bomb, &selector("ok", &[], Aggregate::One)),
            Err(LoadReadError::TooManyLabels {
                line: 2,
                max: MAX_LABELS
            })
        );
        // At the cap, the line is read; one more label is refused.
        let at_cap = labelled(MAX_LABELS, None);
        assert_eq!(
            select(&at_cap, &selector("conns", &[], Aggregate::One)),
            Ok(1)
        );
        let over = labelled(MAX_LABELS + 1, None);
        let err = select(&over, &selector("conns", &[], Aggregate::One)).unwrap_err();
        assert_eq!(
            err,
            LoadReadError::TooManyLabels {
                line: 1,
                max: MAX_LABELS
            }
        );
        assert_eq!(
            err.to_string(),
            format!("line 1: more than {MAX_LABELS} labels on one sample")
        );
    }

    /// A label given twice is found wherever the two are on the line, up to the cap.
    #[test]
    fn duplicate_labels_are_found_anywhere_on_the_line() {
        for (count, dup) in [
            (1, 0),
            (MAX_LABELS - 1, 0),
            (MAX_LABELS - 1, MAX_LABELS - 2),
        ] {
            let line = labelled(count, Some(dup));
            let got = select(&line, &selector("conns", &[], Aggregate::One));
            assert_eq!(
                got,
                Err(LoadReadError::Syntax {
                    line: 1,
                    reason: format!("label l{dup} given twice")
                }),
                "{count} labels, l{dup} again"
            );
        }
        // Quoted and plain spellings of one name are the same label.
        let got = select(
            "conns{a=\"1\",\"b\"=\"2\",\"a\"=\"3\"} 1\n",
            &selector("conns", &[], Aggregate::One),
        );
        assert!(
            got.as_ref()
                .is_err_and(|e| e.to_string() == "line 1: label a given twice"),
            "{got:?}"
        );
    }

    #[test]
    fn values_become_loads() {
        assert_eq!(load_value(0.0), Ok(0));
        assert_eq!(load_value(2.5), Ok(3));
        assert_eq!(load_value(1e30), Ok(MAX_LOAD));
        assert!(load_value(-1.0).is_err());
        assert!(load_value(f64::NEG_INFINITY).is_err());
        // Negative zero is zero.
        assert_eq!(load_value(-0.0), Ok(0));
    }

    #[test]
    fn exposition_values_parse_as_prometheus_writes_them() {
        for (text, want) in [
            ("m 1e3", 1000.0),
            ("m -0.5e-1", -0.05),
            ("m +Inf", f64::INFINITY),
            ("m -Inf 12", f64::NEG_INFINITY),
            ("m 7 -1", 7.0),
        ] {
            assert_eq!(sample(text).unwrap().value, want, "{text}");
        }
        assert!(sample("m NaN").unwrap().value.is_nan());
        let s = sample("m{a=\"é\\\"\"} 1").unwrap();
        assert_eq!(s.labels, [(Cow::from("a"), Cow::from("é\""))]);
    }
}
