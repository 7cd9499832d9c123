//! Record types kept as wire RDATA (`RecordData::Generic`): CAA, PTR, NAPTR, SVCB, HTTPS,
//! TLSA, SSHFP and DS by their mnemonic, and any other type as `TYPEnnn` (RFC 3597).
//!
//! A value in presentation form is parsed by hickory-proto's zone-file parser, as the record
//! of a one-line zone at the record's zone apex, so relative names are relative to the apex
//! as everywhere in `[[zone.record]]`. DS is parsed here (hickory parses it only with its
//! DNSSEC features): key tag, algorithm, digest type and hex digest. Any type may be written
//! in RFC 3597's generic form, `\# LENGTH HEX`; a type hickory knows is then checked by
//! decoding it.

use hickory_proto::rr::{RData, RecordType};
use hickory_proto::serialize::binary::{BinDecoder, BinEncodable, BinEncoder, Restrict};
use hickory_proto::serialize::txt::Parser;

/// The types a record may have, for the error that names an unknown one.
pub(super) const SUPPORTED: &str =
    "A, AAAA, CNAME, TXT, MX, NS, SRV, CAA, PTR, NAPTR, SVCB, HTTPS, TLSA, SSHFP, DS";

/// The types with a mnemonic of their own in the configuration (their own variant of
/// `RecordData`, or a check of their own): never written as `TYPEnnn`.
const OWN_FORM: [u16; 8] = [1, 2, 5, 6, 15, 16, 28, 33];

/// The type code of `upper` (the type, upper case) when it is one kept as wire RDATA; `None`
/// for an unknown mnemonic.
pub(super) fn type_code(upper: &str) -> Option<u16> {
    Some(match upper {
        "CAA" => 257,
        "PTR" => 12,
        "NAPTR" => 35,
        "SVCB" => 64,
        "HTTPS" => 65,
        "TLSA" => 52,
        "SSHFP" => 44,
        "DS" => 43,
        _ => upper.strip_prefix("TYPE")?.parse().ok()?,
    })
}

/// The RDATA of a record of type `code` written `value`, in zone `apex`; the reason when it is
/// not one.
pub(super) fn rdata(code: u16, value: &str, apex: &str) -> Result<Vec<u8>, String> {
    check_code(code)?;
    if value.chars().any(char::is_control) {
        // One record per value: a line break would start another line of the zone text.
        return Err("a control character (a line break?) in the value".into());
    }
    let known = !matches!(RecordType::from(code), RecordType::Unknown(_));
    if let Some(generic) = value.trim_start().strip_prefix("\\#") {
        let bytes = generic_form(generic)?;
        if known && code != 43 {
            decode(code, &bytes)?;
        }
        return Ok(bytes);
    }
    match code {
        43 => ds(value),
        _ if known => presentation(code, value, apex),
        _ => Err(format!(
            "TYPE{code} is a type gslbd does not know: write its data as RFC 3597 \
             \"\\# LENGTH HEX\" (e.g. \"\\# 4 0a000001\")"
        )),
    }
}

/// Refuses the codes no static record may have.
pub(in crate::config) fn check_code(code: u16) -> Result<(), String> {
    let t = RecordType::from(code);
    if OWN_FORM.contains(&code) {
        return Err(format!(
            "write type {t} by its name, with its own value form"
        ));
    }
    match code {
        0 | 41 | 128..=255 => Err(format!(
            "TYPE{code} is a meta or query type (RFC 6895 §3.1), not data"
        )),
        39 => Err("DNAME is not served (it would redirect a whole subtree)".into()),
        46..=48 | 50 | 51 | 59 | 60 => Err(format!(
            "{t} records are DNSSEC's own, not served from the configuration"
        )),
        _ => Ok(()),
    }
}

/// `LENGTH HEX…` (after `\#`): the bytes, which must be LENGTH long.
fn generic_form(text: &str) -> Result<Vec<u8>, String> {
    let mut words = text.split_whitespace();
    let length: usize = words
        .next()
        .and_then(|l| l.parse().ok())
        .filter(|&l| u16::try_from(l).is_ok())
        .ok_or("\\# must be followed by the data's length in bytes, 0..=65535")?;
    let bytes = hex(&words.collect::<String>())?;
    if bytes.len() != length {
        return Err(format!(
            "\\# {length} announces {length} bytes, the hex gives {}",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// Hex digits (either case) as bytes.
fn hex(digits: &str) -> Result<Vec<u8>, String> {
    data_encoding::HEXLOWER_PERMISSIVE
        .decode(digits.as_bytes())
        .map_err(|e| match e.kind {
            data_encoding::DecodeKind::Length => {
                format!("{} hex digits: an odd number", digits.len())
            }
            _ => format!(
                "{:?} is not hex",
                digits
                    .get(e.position..)
                    .and_then(|d| d.chars().next())
                    .unwrap_or('?')
            ),
        })
}

/// DS (RFC 4034 §5.3): key tag, algorithm, digest type, digest in hex (may be split).
fn ds(value: &str) -> Result<Vec<u8>, String> {
    let mut words = value.split_whitespace();
    let mut field = |name: &str| {
        words.next().ok_or(format!(
            "no {name}: a DS is \"KEYTAG ALGORITHM DIGESTTYPE DIGEST\""
        ))
    };
    let key_tag: u16 = field("key tag")?
        .parse()
        .map_err(|_| "the key tag is not a number in 0..=65535")?;
    let algorithm: u8 = field("algorithm")?
        .parse()
        .map_err(|_| "the algorithm is not a number in 0..=255")?;
    let digest_type: u8 = field("digest type")?
        .parse()
        .map_err(|_| "the digest type is not a number in 0..=255")?;
    let digest = hex(&words.collect::<String>())?;
    if digest.is_empty() {
        return Err("no digest: a DS is \"KEYTAG ALGORITHM DIGESTTYPE DIGEST\"".into());
    }
    // SHA-1, SHA-256, SHA-384 digests have their sizes (RFC 4509, 6605).
    if let Some(want) = match digest_type {
        1 => Some(20),
        2 => Some(32),
        4 => Some(48),
        _ => None,
    } && digest.len() != want
    {
        return Err(format!(
            "a digest of type {digest_type} is {want} bytes, this one {}",
            digest.len()
        ));
    }
    let mut out = Vec::with_capacity(4 + digest.len());
    out.extend_from_slice(&key_tag.to_be_bytes());
    out.extend([algorithm, digest_type]);
    out.extend(digest);
    Ok(out)
}

/// `value` in the type's presentation form, parsed as the one record of a zone at `apex`.
fn presentation(code: u16, value: &str, apex: &str) -> Result<Vec<u8>, String> {
    let t = RecordType::from(code);
    let origin = if apex.is_empty() { "." } else { apex };
    let text = format!("$ORIGIN {origin}.\n@ 3600 IN {t} {value}\n");
    let (_, sets) = Parser::new(text, None, None)
        .parse()
        .map_err(|e| format!("not {t} data: {e}"))?;
    let mut records = sets.values().flat_map(|s| s.records_without_rrsigs());
    let (Some(record), None) = (records.next(), records.next()) else {
        return Err(format!("not one {t} record"));
    };
    if record.record_type() != t {
        return Err(format!("not {t} data"));
    }
    encode(&record.data)
}

/// `rdata` in wire form. Every name in it is the RDATA's only one, so none is compressed.
fn encode(rdata: &RData) -> Result<Vec<u8>, String> {
    let mut bytes = Vec::new();
    let mut encoder = BinEncoder::new(&mut bytes);
    rdata
        .emit(&mut encoder)
        .map_err(|e| format!("cannot be encoded: {e}"))?;
    if bytes.len() > usize::from(u16::MAX) {
        return Err(format!("{} bytes of data, at most 65535", bytes.len()));
    }
    Ok(bytes)
}

/// Checks that `bytes` decode as type `code`'s data.
fn decode(code: u16, bytes: &[u8]) -> Result<(), String> {
    let t = RecordType::from(code);
    let length = u16::try_from(bytes.len()).map_err(|_| "over 65535 bytes")?;
    let mut decoder = BinDecoder::new(bytes);
    RData::read(&mut decoder, t, Restrict::new(length))
        .map_err(|e| format!("the generic data is not {t} data: {e}"))?;
    if !decoder.is_empty() {
        return Err(format!("the generic data is longer than its {t} data"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_type_parses_to_its_wire_data() {
        let cases: [(&str, &str, &[u8]); 8] = [
            (
                "CAA",
                "0 issue \"letsencrypt.org\"",
                b"\x00\x05issueletsencrypt.org",
            ),
            (
                "PTR",
                "host",
                b"\x04host\x07example\x03com\x00",
            ),
            (
                "NAPTR",
                "100 10 \"U\" \"E2U+sip\" \"!^.*$!sip:info@example.com!\" .",
                b"\x00\x64\x00\x0a\x01U\x07E2U+sip\x1b!^.*$!sip:info@example.com!\x00",
            ),
            (
                "SVCB",
                "1 svc.example.net. alpn=h2",
                b"\x00\x01\x03svc\x07example\x03net\x00\x00\x01\x00\x03\x02h2",
            ),
            (
                "HTTPS",
                "0 www.example.com.",
                b"\x00\x00\x03www\x07example\x03com\x00",
            ),
            ("TLSA", "3 1 1 0a0b", b"\x03\x01\x01\x0a\x0b"),
            ("SSHFP", "4 2 0a0b", b"\x04\x02\x0a\x0b"),
            (
                "DS",
                "12345 13 2 0001020304050607080910111213141516171819202122232425262728293031",
                b"\x30\x39\x0d\x02\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x20\x21\x22\x23\x24\x25\x26\x27\x28\x29\x30\x31",
            ),
        ];
        for (t, value, want) in cases {
            let code = type_code(t).unwrap();
            assert_eq!(
                rdata(code, value, "example.com").as_deref(),
                Ok(want),
                "{t} {value}"
            );
        }
    }

    #[test]
    fn the_generic_form_is_any_types() {
        assert_eq!(
            rdata(65534, "\\# 4 0a000001", "example.com"),
            Ok(vec![10, 0, 0, 1])
        );
        assert_eq!(rdata(65534, "\\# 0", "example.com"), Ok(vec![]));
        // Split hex, and a known type in the generic form, checked.
        assert_eq!(
            rdata(257, "\\# 7 0005 6973 737565", "example.com"),
            Ok(b"\x00\x05issue".to_vec())
        );
        for (code, value, why) in [
            (65534, "\\# 5 0a000001", "announces 5 bytes"),
            (65534, "\\# 4 0a00001", "odd number"),
            (65534, "\\# 2 zz00", "not hex"),
            (65534, "10.0.0.1", "RFC 3597"),
            (257, "\\# 3 000569", "not CAA data"),
            (1, "\\# 4 0a000001", "by its name"),
            (46, "\\# 0", "DNSSEC"),
            (255, "\\# 0", "meta or query"),
            (39, "\\# 0", "DNAME"),
            (12, "a\n$INCLUDE /etc/passwd", "control character"),
            (43, "1 13 2 00", "32 bytes"),
            (43, "1 13", "no digest type"),
            (257, "0 issue", "not CAA data"),
        ] {
            let got = rdata(code, value, "example.com");
            assert!(
                got.as_ref().is_err_and(|e| e.contains(why)),
                "TYPE{code} {value:?}: {got:?}, not {why:?}"
            );
        }
    }

    #[test]
    fn mnemonics_and_type_numbers() {
        assert_eq!(type_code("CAA"), Some(257));
        assert_eq!(type_code("TYPE65534"), Some(65534));
        assert_eq!(type_code("TYPE70000"), None);
        assert_eq!(type_code("HINFO"), None);
    }
}
