//! The text targets' seeds: config, zone_file, location, prometheus, http_body.

use std::path::Path;

use gslb_user::location::netscaler::FileFormat;
use mmdb_writer::{Value, Writer};

use crate::{Corpus, MAX_LEN};

/// The files of examples/ whose name ends in `suffix`, by name.
fn examples(root: &Path, suffix: &str) -> Vec<(String, Vec<u8>)> {
    let mut files: Vec<(String, Vec<u8>)> = std::fs::read_dir(root.join("examples"))
        .expect("examples/")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .map(|p| {
            let name = p
                .file_name()
                .expect("a name")
                .to_string_lossy()
                .into_owned();
            (name, std::fs::read(&p).expect("an example"))
        })
        .collect();
    files.sort();
    files
}

pub(crate) fn config_seeds(corpus: &mut Corpus, root: &Path) {
    for (name, text) in examples(root, ".toml") {
        corpus.add("config", format!("example-{name}"), text);
    }
}

/// The zone files of examples/zones/, and what master files have that they lack: each
/// directive, escapes, a multi-line TXT, an owner-less first line, a record per type.
pub(crate) fn zone_file_seeds(corpus: &mut Corpus, root: &Path) {
    let dir = root.join("examples/zones");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("examples/zones/")
        .map(|e| e.expect("an entry").path())
        .collect();
    files.sort();
    for path in files {
        let name = path
            .file_name()
            .expect("a name")
            .to_string_lossy()
            .into_owned();
        corpus.add(
            "zone_file",
            format!("example-{name}"),
            std::fs::read(&path).expect("a zone"),
        );
    }
    let written: [(&str, &str); 4] = [
        (
            "directives",
            "$ORIGIN example.com.\n$TTL 1h30m\n@ SOA ns1 h ( 1 2 3 4 5 )\n NS ns1\nns1 A 192.0.2.1\n             $ORIGIN sub.example.com.\nx 60 IN AAAA 2001:db8::1\n$INCLUDE other.zone x.example.com.\n",
        ),
        (
            "escapes",
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n             t TXT \"a;b\" \"\\\"q\\\"\" \"\\200\\255\" ( \"multi\"\n \"line\" )\n             weird\\.label A 192.0.2.2\n",
        ),
        (
            "types",
            "@ 300 SOA ns1 h 1 2 3 4 5\n@ 300 NS ns.example.net.\n             @ CAA 0 issue \"ca.example\"\n_443._tcp TLSA 3 1 1 00ff\nh SSHFP 4 2 00ff\n             s HTTPS 1 . alpn=h2\np PTR host.example.net.\nn NAPTR 1 1 \"S\" \"x\" \"\" _s\n             g TYPE65534 \\# 2 abcd\nw *.w A 192.0.2.3\n",
        ),
        ("no-soa", "   NS ns1\n; only a comment ( )\n"),
    ];
    for (name, text) in written {
        corpus.add(
            "zone_file",
            format!("written-{name}"),
            text.as_bytes().to_vec(),
        );
    }
}

/// The location target's choice byte for `format` (its place among the format names).
fn format_byte(format: &str) -> u8 {
    FileFormat::names()
        .position(|n| n == format)
        .expect("a format name") as u8
}

pub(crate) fn location_seeds(corpus: &mut Corpus, root: &Path) {
    let formats = FileFormat::names().count() as u8;
    for (name, text) in examples(root, ".csv") {
        // The format each has in examples/static-proximity.toml.
        let format = if name.contains("ip2location") {
            "ip-country"
        } else {
            "netscaler"
        };
        let seed = [&[format_byte(format)][..], &text].concat();
        corpus.add("location", format!("example-{name}"), seed);
    }
    // MaxMind databases as mmdb-writer writes them (as MaxMind's own writer lays them out):
    // a City and an ASN database with the fields gslbd reads. Choice bytes: after the formats.
    let mut city = Writer::new("GeoLite2-City");
    let place = |continent: (&str, &str), country: &str, region: &str, city: &str| {
        Value::map([
            (
                "continent",
                Value::map([
                    ("code", Value::from(continent.0)),
                    ("names", Value::map([("en", Value::from(continent.1))])),
                ]),
            ),
            ("country", Value::map([("iso_code", Value::from(country))])),
            (
                "subdivisions",
                Value::array([Value::map([("iso_code", Value::from(region))])]),
            ),
            (
                "city",
                Value::map([("names", Value::map([("en", Value::from(city))]))]),
            ),
            (
                "location",
                Value::map([
                    ("latitude", Value::from(48.85)),
                    ("longitude", Value::from(2.35)),
                ]),
            ),
        ])
    };
    for (net, value) in [
        (
            "198.51.100.0/24",
            place(("EU", "Europe"), "FR", "IDF", "Paris"),
        ),
        (
            "203.0.113.0/25",
            place(("NA", "North America"), "US", "NY", "New York"),
        ),
        (
            "2001:db8:1::/48",
            place(("AS", "Asia"), "JP", "13", "Tokyo"),
        ),
    ] {
        city.insert_value(net.parse::<ipnet::IpNet>().expect("a prefix"), value)
            .expect("a record");
    }
    let mut asn = Writer::new("GeoLite2-ASN");
    for (net, number, org) in [
        ("198.51.100.0/24", 64_500_u32, "Example Transit"),
        ("2001:db8::/32", 64_501, "Documentation Networks"),
    ] {
        let record = Value::map([
            ("autonomous_system_number", Value::from(number)),
            ("autonomous_system_organization", Value::from(org)),
        ]);
        asn.insert_value(net.parse::<ipnet::IpNet>().expect("a prefix"), record)
            .expect("a record");
    }
    for (name, choice, db) in [("city.mmdb", formats, city), ("asn.mmdb", formats + 1, asn)] {
        let bytes = db.to_bytes().expect("an mmdb");
        corpus.add(
            "location",
            format!("mmdb-{name}"),
            [&[choice][..], &bytes].concat(),
        );
    }
}

pub(crate) fn prometheus_seeds(corpus: &mut Corpus) {
    // As node_exporter and nginx-prometheus-exporter write their pages (abridged), after the
    // target's selector line.
    let node = "\
# HELP node_load1 1m load average.
# TYPE node_load1 gauge
node_load1 0.42
# HELP node_netstat_Tcp_CurrEstab Statistic TcpCurrEstab.
# TYPE node_netstat_Tcp_CurrEstab untyped
node_netstat_Tcp_CurrEstab 118
# HELP node_network_receive_bytes_total Network device statistic receive_bytes.
# TYPE node_network_receive_bytes_total counter
node_network_receive_bytes_total{device=\"eth0\"} 1.234567e+09
node_network_receive_bytes_total{device=\"lo\"} 4.2e+07
# HELP node_filesystem_avail_bytes Filesystem space available to non-root users in bytes.
# TYPE node_filesystem_avail_bytes gauge
node_filesystem_avail_bytes{device=\"/dev/vda1\",fstype=\"ext4\",mountpoint=\"/\"} 3.5e+10
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.71e+09
";
    let nginx = "\
# HELP nginx_connections_active Active client connections
# TYPE nginx_connections_active gauge
nginx_connections_active{instance=\"web-1\"} 291
nginx_connections_active{instance=\"web-2\"} 17
# HELP nginx_http_requests_total Total http requests
# TYPE nginx_http_requests_total counter
nginx_http_requests_total 31070465 1716400000000
# HELP nginx_up Status of the last metric scrape
# TYPE nginx_up gauge
nginx_up 1
";
    // Prometheus 3's quoted names, escapes, NaN and infinities, a trailing comma.
    let quoted = "\
# TYPE \"http.server.active_requests\" gauge
{\"http.server.active_requests\",\"server.address\"=\"web-1\",} 12
{\"http.server.active_requests\",\"server.address\"=\"web\\\\2\\\"\\n\"} 3 -5
temperature_celsius{room=\"a\"} NaN
queue_depth +Inf
queue_depth{q=\"low\"} -Inf
";
    let seeds = [
        ("node-exporter-load", "node_load1", node),
        (
            "node-exporter-connections",
            "node_netstat_Tcp_CurrEstab",
            node,
        ),
        (
            "node-exporter-labels",
            "node_filesystem_avail_bytes mountpoint=/ fstype=ext4",
            node,
        ),
        (
            "node-exporter-counter",
            "node_network_receive_bytes_total device=eth0",
            node,
        ),
        (
            "nginx-exporter-one",
            "nginx_connections_active instance=web-1",
            nginx,
        ),
        ("nginx-exporter-sum", "+nginx_connections_active", nginx),
        (
            "nginx-exporter-ambiguous",
            "nginx_connections_active",
            nginx,
        ),
        (
            "quoted-names",
            "http.server.active_requests server.address=web-1",
            quoted,
        ),
        ("quoted-sum", "+http.server.active_requests", quoted),
        ("nan", "temperature_celsius", quoted),
        (
            "stub-status",
            "",
            "Active connections: 291 \nserver accepts handled requests\n 16630948 16630948 31070465 \nReading: 6 Writing: 179 Waiting: 106 \n",
        ),
    ];
    for (name, selector, page) in seeds {
        corpus.add(
            "prometheus",
            name,
            format!("{selector}\n{page}").into_bytes(),
        );
    }
    // The most labels one line of a 64 KiB page holds, each named once, and the same with
    // the last name repeated: the parser's worst case for its duplicate-label check.
    let head = "many_labels\nmany_labels{";
    let mut line = String::from(head);
    let mut i = 0;
    loop {
        let label = format!("l{i}=\"\",");
        if line.len() + label.len() + "} 1\n".len() > MAX_LEN {
            break;
        }
        line.push_str(&label);
        i += 1;
    }
    let distinct = format!("{line}}} 1\n");
    let repeated = format!("{line}l0=\"\"}} 1\n");
    corpus.add("prometheus", "max-labels", distinct.into_bytes());
    if repeated.len() <= MAX_LEN {
        corpus.add("prometheus", "max-labels-repeated", repeated.into_bytes());
    } else {
        let cut = &line[..line.len() - format!("l{}=\"\",", i - 1).len()];
        corpus.add(
            "prometheus",
            "max-labels-repeated",
            format!("{cut}l0=\"\"}} 1\n").into_bytes(),
        );
    }
}

pub(crate) fn http_seeds(corpus: &mut Corpus) {
    // Mode (0 raw, 1 chunked, 2 Content-Length), needle length less one, needle, then for
    // the framed modes the count of chunk sizes less one, the sizes less one, and the body.
    let framed = |mode: u8, needle: &str, sizes: &[u8], body: &str| {
        let mut s = vec![mode, (needle.len() - 1) as u8];
        s.extend_from_slice(needle.as_bytes());
        if mode != 0 {
            s.push((sizes.len() - 1) as u8);
            s.extend_from_slice(sizes);
        }
        s.extend_from_slice(body.as_bytes());
        s
    };
    let page = "<!DOCTYPE html>\n<html><head><title>status</title></head>\n<body><p>status: OK</p>\n<p>backend web-1 healthy</p></body></html>\n";
    corpus.add(
        "http_body",
        "chunked-found",
        framed(1, "status: OK", &[15], page),
    );
    // The needle cut across chunks of 1, 2 and 4 bytes.
    corpus.add(
        "http_body",
        "chunked-split",
        framed(1, "healthy", &[0, 1, 3], page),
    );
    corpus.add(
        "http_body",
        "chunked-absent",
        framed(1, "degraded", &[63], page),
    );
    corpus.add("http_body", "length-found", framed(2, "OK", &[0], page));
    // Responses as nginx sends them, whole.
    let raw = [
        (
            "raw-nginx-200",
            "OK",
            "HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Mon, 02 Dec 2024 10:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nOK\n",
        ),
        (
            "raw-nginx-chunked",
            "ready",
            "HTTP/1.1 200 OK\r\nServer: nginx\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nrea\r\n3\r\ndy\n\r\n0\r\nX-Trailer: 1\r\n\r\n",
        ),
        (
            "raw-nginx-404",
            "OK",
            "HTTP/1.1 404 Not Found\r\nServer: nginx\r\nContent-Type: text/html\r\nContent-Length: 22\r\n\r\n<h1>404 Not Found</h1>",
        ),
        (
            "raw-http10-close",
            "up",
            "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nservice is up\n",
        ),
    ];
    for (name, needle, response) in raw {
        corpus.add("http_body", name, framed(0, needle, &[], response));
    }
}
