//! The fields of one line of a location file: comma-separated, optionally double-quoted
//! (`"St. Albans"`, `""` for a quote inside), trimmed; and the address and coordinate fields.

use std::{borrow::Cow, net::IpAddr};

use super::Coordinates;

/// The most fields a line of any format has (`geoip-city-isp-org`).
pub(super) const MAX_FIELDS: usize = 12;

/// One field: its text (unquoted, trimmed) and its byte span in the line (quotes included).
#[derive(Default)]
pub(super) struct Field<'a> {
    pub text: Cow<'a, str>,
    pub span: (usize, usize),
}

/// Splits `line` at commas outside double quotes into `out`; returns how many fields. More
/// than `max` fields is an error (`expected` describes the format).
pub(super) fn split<'a>(
    line: &'a str,
    out: &mut [Field<'a>; MAX_FIELDS],
    max: usize,
    expected: &str,
) -> Result<usize, String> {
    let bytes = line.as_bytes();
    let mut n = 0;
    let mut pos = 0;
    loop {
        if n == max {
            return Err(format!("more than {max} fields; expected {expected}"));
        }
        while pos < bytes.len() && (bytes[pos] == b' ' || bytes[pos] == b'\t') {
            pos += 1;
        }
        let start = pos;
        let (text, end) = if bytes.get(pos) == Some(&b'"') {
            let mut owned: Option<String> = None;
            let mut seg = pos + 1;
            let mut i = pos + 1;
            loop {
                match bytes.get(i) {
                    None => return Err(format!("field {}: unterminated quote", n + 1)),
                    Some(b'"') if bytes.get(i + 1) == Some(&b'"') => {
                        owned
                            .get_or_insert_with(String::new)
                            .push_str(&line[seg..=i]);
                        i += 2;
                        seg = i;
                    }
                    Some(b'"') => break,
                    Some(_) => i += 1,
                }
            }
            let text = match owned {
                Some(mut s) => {
                    s.push_str(&line[seg..i]);
                    Cow::Owned(s)
                }
                None => Cow::Borrowed(&line[pos + 1..i]),
            };
            pos = i + 1;
            let end = pos;
            while pos < bytes.len() && (bytes[pos] == b' ' || bytes[pos] == b'\t') {
                pos += 1;
            }
            if pos < bytes.len() && bytes[pos] != b',' {
                return Err(format!("field {}: text after the closing quote", n + 1));
            }
            (text, end)
        } else {
            let end = bytes[pos..]
                .iter()
                .position(|&b| b == b',')
                .map_or(bytes.len(), |i| pos + i);
            pos = end;
            (Cow::Borrowed(line[start..end].trim_end()), end)
        };
        out[n] = Field {
            text,
            span: (start, end),
        };
        n += 1;
        if pos >= bytes.len() {
            return Ok(n);
        }
        pos += 1; // the comma
    }
}

/// A dotted-quad IPv4, an IPv6 address, or a decimal 32-bit number (IPv4).
pub(super) fn addr(s: &str) -> Result<IpAddr, String> {
    if !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) {
        return s
            .parse::<u32>()
            .map(|n| IpAddr::V4(n.into()))
            .map_err(|_| format!("{s:?}: a numeric address is IPv4, at most 4294967295"));
    }
    s.parse::<IpAddr>()
        .map_err(|_| format!("{s:?}: not an IPv4 address, an IPv6 address or a 32-bit number"))
}

/// Longitude and latitude fields: both empty (none), or both numbers in range.
pub(super) fn coordinates(longitude: &str, latitude: &str) -> Result<Option<Coordinates>, String> {
    match (longitude.is_empty(), latitude.is_empty()) {
        (true, true) => return Ok(None),
        (true, false) => return Err("latitude without longitude".into()),
        (false, true) => return Err("longitude without latitude".into()),
        (false, false) => {}
    }
    let number = |what: &str, s: &str, max: f64| match s.parse::<f64>() {
        Ok(v) if (-max..=max).contains(&v) => Ok(v),
        _ => Err(format!("{what} {s:?}: not a number from -{max} to {max}")),
    };
    Ok(Some(Coordinates {
        longitude: number("longitude", longitude, 180.0)?,
        latitude: number("latitude", latitude, 90.0)?,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str) -> Result<Vec<String>, String> {
        let mut out: [Field<'_>; MAX_FIELDS] = Default::default();
        let n = split(line, &mut out, 10, "test")?;
        Ok(out[..n].iter().map(|f| f.text.to_string()).collect())
    }

    #[test]
    fn fields_are_split_unquoted_and_trimmed() {
        let table: [(&str, &[&str]); 6] = [
            ("a,b,c", &["a", "b", "c"]),
            (" a , b ,c ", &["a", "b", "c"]),
            (r#""a,b", "c""d",,"#, &["a,b", "c\"d", "", ""]),
            (
                r#""2001:200::", "2001:200::ff""#,
                &["2001:200::", "2001:200::ff"],
            ),
            ("", &[""]),
            ("\"\"", &[""]),
        ];
        for (line, want) in table {
            assert_eq!(fields(line).unwrap(), want, "{line}");
        }
        assert!(
            fields("1,2,3,4,5,6,7,8,9,10,11")
                .unwrap_err()
                .contains("more than 10")
        );
        assert!(
            fields("\"a")
                .unwrap_err()
                .contains("field 1: unterminated quote")
        );
        assert!(
            fields("a,\"b\"c")
                .unwrap_err()
                .contains("field 2: text after")
        );
    }

    #[test]
    fn addresses_and_coordinates() {
        assert_eq!(
            addr("16777216").unwrap(),
            "1.0.0.0".parse::<IpAddr>().unwrap()
        );
        assert_eq!(
            addr("1.0.0.0").unwrap(),
            "1.0.0.0".parse::<IpAddr>().unwrap()
        );
        assert!(addr("2001:db8::").unwrap().is_ipv6());
        assert!(
            addr("4294967296")
                .unwrap_err()
                .contains("at most 4294967295")
        );
        assert!(addr("1.2.3").is_err());
        assert_eq!(coordinates("", "").unwrap(), None);
        assert_eq!(
            coordinates("-0.1", "51.5").unwrap(),
            Some(Coordinates {
                latitude: 51.5,
                longitude: -0.1
            })
        );
        assert!(
            coordinates("181", "0")
                .unwrap_err()
                .contains("longitude \"181\"")
        );
        assert!(
            coordinates("0", "-90.5")
                .unwrap_err()
                .contains("latitude \"-90.5\"")
        );
        assert!(coordinates("NaN", "0").is_err());
    }
}
