//! A load monitor's reading of a page (`health::load::read_page`): the Prometheus text parser
//! and the choice of one gauge, or nginx `stub_status`. The input's first line is the
//! selector: empty for `stub_status`, else `metric label=value …`, summed when it starts with
//! `+`; the rest is the page. A reading must never panic, a value is at most `MAX_LOAD`, a
//! syntax error names a line of the page, and a page's value does not change when comments
//! and blank lines are added to it, or (summed) when one series is all it matches.
#![no_main]

use gslb_user::health::load::{
    Aggregate, LoadReadError, LoadSource, MAX_LOAD, PromSelector, read_page,
};
use libfuzzer_sys::{Corpus, fuzz_target};

fuzz_target!(|data: &[u8]| -> Corpus {
    let Some(newline) = data.iter().position(|&b| b == b'\n') else {
        return Corpus::Reject;
    };
    let Ok(head) = std::str::from_utf8(&data[..newline]) else {
        return Corpus::Reject;
    };
    let page = &data[newline + 1..];
    let source = match head.strip_prefix('+') {
        None if head.is_empty() => LoadSource::StubStatus,
        sum => {
            let mut words = sum.unwrap_or(head).split(' ');
            LoadSource::Prometheus(PromSelector {
                metric: words.next().unwrap_or_default().to_owned(),
                labels: words
                    .filter_map(|w| w.split_once('='))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect(),
                aggregate: if sum.is_some() {
                    Aggregate::Sum
                } else {
                    Aggregate::One
                },
            })
        }
    };
    let read = read_page(&source, page);
    match &read {
        Ok(value) => assert!(*value <= MAX_LOAD, "{value} over MAX_LOAD"),
        Err(LoadReadError::Syntax { line, reason }) => {
            let lines = page.split(|&b| b == b'\n').count();
            assert!(
                (1..=lines).contains(line),
                "line {line} of {lines}: {reason}"
            );
        }
        Err(_) => {}
    }
    let LoadSource::Prometheus(selector) = &source else {
        return Corpus::Keep;
    };
    // Comments and blank lines, before and after, change nothing (the lines shift by three).
    let mut padded = b"# HELP other_metric some help\n\n# a comment\n".to_vec();
    padded.extend_from_slice(page);
    padded.extend_from_slice(b"\n\n# the end\n");
    let again = read_page(&source, &padded);
    match (&read, &again) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "comments changed the value"),
        (
            Err(LoadReadError::Syntax { line: a, .. }),
            Err(LoadReadError::Syntax { line: b, .. }),
        ) => {
            assert_eq!(a + 3, *b, "comments moved the error");
        }
        (Err(a), Err(b)) => assert_eq!(
            std::mem::discriminant(a),
            std::mem::discriminant(b),
            "{a} became {b}"
        ),
        _ => panic!("comments turned {read:?} into {again:?}"),
    }
    // One matching series: its value whether summed or not.
    if selector.aggregate == Aggregate::One
        && let Ok(one) = read
    {
        let sum = LoadSource::Prometheus(PromSelector {
            aggregate: Aggregate::Sum,
            ..selector.clone()
        });
        assert_eq!(
            read_page(&sum, page).ok(),
            Some(one),
            "the sum of one series"
        );
    }
    Corpus::Keep
});
