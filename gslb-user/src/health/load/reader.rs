//! One load monitor's reading: the page fetched over HTTP(S), its value read off the runtime
//! thread as its source says (Prometheus text or nginx `stub_status`).

use std::{
    net::{IpAddr, SocketAddr},
    time::Duration,
};

use crate::health::{CheckError, HttpCheck, MonitorSpecError, http::HttpChecker};

use super::{
    LoadMonitorSpec, LoadReadError, LoadSource, MAX_LOAD, Measure, PAGE_LIMIT, prometheus,
};

/// A load monitor's reading, ready to run.
pub(super) struct LoadReader {
    http: HttpChecker,
    source: LoadSource,
}

impl LoadReader {
    pub(super) fn new(
        target: IpAddr,
        service_port: u16,
        spec: &LoadMonitorSpec,
    ) -> Result<Self, MonitorSpecError> {
        if spec.interval.is_zero() {
            return Err(MonitorSpecError::ZeroInterval);
        }
        if spec.timeout.is_zero() {
            return Err(MonitorSpecError::ZeroTimeout);
        }
        if spec.source == LoadSource::StubStatus && spec.measure != Measure::Connections {
            return Err(MonitorSpecError::StubStatusMeasure);
        }
        let addr = SocketAddr::new(target, spec.port.unwrap_or(service_port));
        let check = HttpCheck {
            path: spec.path.clone(),
            host: spec.host.clone(),
            expect_status: Vec::new(),
            body_contains: None,
        };
        Ok(LoadReader {
            http: HttpChecker::new(addr, &check, spec.tls.as_ref())?,
            source: spec.source.clone(),
        })
    }

    async fn read(&self) -> Result<u64, CheckError> {
        let body = self.http.fetch(PAGE_LIMIT).await?;
        page_value(body, self.source.clone())
            .await
            .map_err(CheckError::Load)
    }

    pub(super) async fn read_within(&self, timeout: Duration) -> Result<u64, CheckError> {
        tokio::time::timeout(timeout, self.read())
            .await
            .unwrap_or(Err(CheckError::Timeout(timeout)))
    }
}

/// The value `source` picks from a fetched page. The parse is linear in the page (at most
/// [`PAGE_LIMIT`] bytes, [`prometheus::MAX_LABELS`] labels a line) but takes milliseconds for
/// a large page, so it runs on a blocking thread: on a runtime worker it would hold up the
/// other tasks there, and the check's own timeout could not fire until it ended.
async fn page_value(body: Vec<u8>, source: LoadSource) -> Result<u64, LoadReadError> {
    match tokio::task::spawn_blocking(move || read_page(&source, &body)).await {
        Ok(value) => value,
        // A panic in the parse is the monitor task's (supervised: a failed check).
        Err(error) if error.is_panic() => std::panic::resume_unwind(error.into_panic()),
        // Cancelled: the runtime is shutting down, and this check with it.
        Err(_) => std::future::pending().await,
    }
}

/// The value `source` reads from a fetched page (`body`, as the server sent it): what a load
/// monitor does with each page it fetches, also for the `prometheus` fuzz target.
pub fn read_page(source: &LoadSource, body: &[u8]) -> Result<u64, LoadReadError> {
    let page = std::str::from_utf8(body).map_err(|source| LoadReadError::NotUtf8 { source })?;
    match source {
        LoadSource::Prometheus(selector) => prometheus::select(page, selector),
        LoadSource::StubStatus => stub_status_active(page),
    }
}

/// nginx `stub_status`'s first line, `Active connections: N` (the connection asking included).
fn stub_status_active(page: &str) -> Result<u64, LoadReadError> {
    let first = page
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .ok_or(LoadReadError::EmptyStubStatus)?;
    let Some(count) = first.strip_prefix("Active connections:") else {
        return Err(LoadReadError::NotStubStatus {
            start: first.chars().take(40).collect(),
        });
    };
    let count = count.trim();
    count
        .parse::<u64>()
        .map(|n| n.min(MAX_LOAD))
        .map_err(|_| LoadReadError::StubStatusCount {
            count: count.to_owned(),
        })
}

/// Reads one value of `spec` against `target` (`port` unless the spec has its own) within the
/// spec's timeout, outside any monitor: for tools and tests.
pub async fn read_once(
    target: IpAddr,
    port: u16,
    spec: &LoadMonitorSpec,
) -> Result<u64, CheckError> {
    let reader = LoadReader::new(target, port, spec).map_err(CheckError::Invalid)?;
    reader.read_within(spec.timeout).await
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, atomic::Ordering};

    use super::*;
    use crate::health::load::{Aggregate, PromSelector};

    /// A page as large as a check may fetch is read on a blocking thread, not on the
    /// runtime's: on a one-thread runtime, another task runs while it is parsed (so a check's
    /// timeout can fire, and the other monitors keep their schedule).
    #[tokio::test]
    async fn a_page_is_parsed_off_the_runtime_thread() {
        let mut page = String::from("# TYPE conns gauge\n");
        let mut i = 0;
        while page.len() < PAGE_LIMIT - 64 {
            page.push_str(&format!("conns{{pool=\"p{i}\",site=\"eu\"}} {}\n", i % 7));
            i += 1;
        }
        let source = LoadSource::Prometheus(PromSelector {
            metric: "conns".into(),
            labels: vec![("pool".into(), "p3".into())],
            aggregate: Aggregate::One,
        });
        let ran = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counter = ran.clone();
        let other = tokio::spawn(async move {
            loop {
                counter.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
        });
        let value = page_value(page.into_bytes(), source).await;
        let ran_meanwhile = ran.load(Ordering::Relaxed);
        other.abort();
        assert_eq!(value, Ok(3));
        assert!(
            ran_meanwhile > 0,
            "the other task never ran while {i} samples were parsed"
        );
    }

    #[test]
    fn a_page_is_read_as_its_source_says() {
        let prometheus = LoadSource::Prometheus(PromSelector {
            metric: "conns".into(),
            labels: vec![],
            aggregate: Aggregate::One,
        });
        assert_eq!(
            read_page(&prometheus, b"# TYPE conns gauge\nconns 7\n"),
            Ok(7)
        );
        let stub = b"Active connections: 3\n";
        assert_eq!(read_page(&LoadSource::StubStatus, stub), Ok(3));
        assert!(matches!(
            read_page(&prometheus, stub),
            Err(LoadReadError::Syntax { line: 1, .. })
        ));
        assert!(matches!(
            read_page(&LoadSource::StubStatus, b"Active connections: \xff"),
            Err(LoadReadError::NotUtf8 { .. })
        ));
    }

    #[test]
    fn stub_status_pages() {
        let page = "Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n";
        assert_eq!(stub_status_active(page), Ok(291));
        assert_eq!(stub_status_active("\n  Active connections:1\n"), Ok(1));
        for (bad, want) in [
            ("", "an empty page"),
            (
                "<html>Welcome to nginx!</html>",
                "not an nginx stub_status page",
            ),
            ("Active connections: many\n", "\"many\" is not a number"),
            ("Active connections: -1\n", "is not a number"),
        ] {
            let got = stub_status_active(bad);
            assert!(
                got.as_ref().is_err_and(|e| e.to_string().contains(want)),
                "{bad:?}: {got:?}"
            );
        }
    }
}
