//! `dig`'s output read: the answer section, the header flags, a whole reply ([`DigReply`]).

/// The answer section of a `dig` output: (name, type, data) triples.
pub fn dig_answers(out: &str) -> Vec<(String, String, String)> {
    let mut answers = Vec::new();
    let mut in_answer = false;
    for line in out.lines() {
        if line.starts_with(";; ANSWER SECTION") {
            in_answer = true;
            continue;
        }
        if in_answer {
            if line.trim().is_empty() {
                break;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() >= 5 {
                answers.push((f[0].to_owned(), f[3].to_owned(), f[4..].join(" ")));
            }
        }
    }
    answers
}

/// The header flags of a `dig` output, e.g. `["qr", "aa"]`.
pub fn dig_flags(out: &str) -> Vec<String> {
    out.lines()
        .find_map(|l| l.strip_prefix(";; flags: "))
        .and_then(|l| l.split(';').next())
        .map(|f| f.split_whitespace().map(str::to_owned).collect())
        .unwrap_or_default()
}

/// A `dig` output, section by section; records as "owner TTL TYPE data" (the class left out).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DigReply {
    pub opcode: String,
    /// The RCODE's mnemonic: NOERROR, NXDOMAIN, BADVERS, …
    pub status: String,
    /// The header flags, e.g. `["qr", "aa"]`.
    pub flags: Vec<String>,
    pub answer: Vec<String>,
    pub authority: Vec<String>,
    pub additional: Vec<String>,
    /// The UDP size of the reply's OPT record; `None` without one.
    pub edns_udp: Option<u16>,
}

impl DigReply {
    pub fn parse(out: &str) -> DigReply {
        let header = out
            .lines()
            .find_map(|l| l.strip_prefix(";; ->>HEADER<<- "))
            .unwrap_or("");
        let field = |name: &str| {
            header
                .split(", ")
                .find_map(|f| f.strip_prefix(name))
                .unwrap_or("")
                .to_owned()
        };
        let section = |name: &str| {
            let title = format!(";; {name} SECTION:");
            out.lines()
                .skip_while(|l| *l != title)
                .skip(1)
                .take_while(|l| !l.trim().is_empty())
                .map(
                    |l| match l.split_whitespace().collect::<Vec<_>>().as_slice() {
                        [owner, ttl, _class, rtype, data @ ..] => {
                            format!("{owner} {ttl} {rtype} {}", data.join(" "))
                        }
                        _ => l.to_owned(),
                    },
                )
                .collect()
        };
        DigReply {
            opcode: field("opcode: "),
            status: field("status: "),
            flags: dig_flags(out),
            answer: section("ANSWER"),
            authority: section("AUTHORITY"),
            additional: section("ADDITIONAL"),
            edns_udp: out
                .lines()
                .find_map(|l| l.strip_prefix("; EDNS: "))
                .and_then(|l| l.rsplit_once("udp: "))
                .and_then(|(_, size)| size.trim().parse().ok()),
        }
    }

    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.iter().any(|f| f == flag)
    }
}
