//! DNS policy expressions, in NetScaler's default syntax:
//!
//! ```text
//! CLIENT.IP.SRC.MATCHES_LOCATION("*.ZMB.*.*") && !DNS.REQ.QUESTION.TYPE.EQ(AAAA)
//! (CLIENT.IP.SRC.IN_SUBNET(198.51.100.0/24) || CLIENT.IPV6.SRC.IN_SUBNET(2001:db8::/32))
//! DNS.REQ.QUESTION.DOMAIN.EQ("www.example.com")
//! ```
//!
//! Keywords are case-insensitive, as on a NetScaler. `!` binds tighter than `&&`, which binds
//! tighter than `||`. `TRUE` and `FALSE` are accepted too (a catch-all policy is `TRUE`).
//! Errors carry the byte offset and the 1-based character column of the offending text.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use crate::location::{Context, Location, Match, WildcardMode};

/// A parsed expression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    Const(bool),
    /// `CLIENT.IP.SRC.MATCHES_LOCATION("…")`: the client's location matches perfectly.
    MatchesLocation(Location),
    /// `CLIENT.IP.SRC.IN_SUBNET(…)` / `CLIENT.IPV6.SRC.IN_SUBNET(…)`.
    InSubnet(IpNet),
    /// `DNS.REQ.QUESTION.DOMAIN.EQ("…")`: lower-case, without the trailing dot.
    DomainEq(Box<str>),
    /// `DNS.REQ.QUESTION.TYPE.EQ(A)`.
    TypeEq(u16),
    Not(Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
}

/// What an expression can look at.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The client address (the LDNS, or the ECS subnet's address).
    pub client: IpAddr,
    /// The client's location from the location database; `None` when it is not there.
    pub location: Option<&'a Location>,
    /// The question name, any case, trailing dot optional.
    pub qname: &'a str,
    pub qtype: u16,
}

/// Record types `DNS.REQ.QUESTION.TYPE.EQ` knows by name.
const QTYPES: [(&str, u16); 10] = [
    ("A", 1),
    ("NS", 2),
    ("CNAME", 5),
    ("SOA", 6),
    ("PTR", 12),
    ("MX", 15),
    ("TXT", 16),
    ("AAAA", 28),
    ("SRV", 33),
    ("ANY", 255),
];

/// The functions the parser knows, for the "unknown function" hint.
const FUNCTIONS: &str = "CLIENT.IP.SRC.MATCHES_LOCATION(\"loc\"), CLIENT.IP.SRC.IN_SUBNET(a.b.c.d/n), \
                         CLIENT.IPV6.SRC.IN_SUBNET(x::/n), DNS.REQ.QUESTION.DOMAIN.EQ(\"name\"), \
                         DNS.REQ.QUESTION.TYPE.EQ(A|AAAA|…), TRUE, FALSE";

impl Expr {
    /// Parses `text`; see the module documentation for the syntax.
    pub fn parse(text: &str) -> Result<Expr, ExprError> {
        let mut p = Parser { text, pos: 0 };
        p.skip_space();
        if p.pos == text.len() {
            return Err(p.error(p.pos, ExprErrorKind::Empty));
        }
        let expr = p.or()?;
        p.skip_space();
        if p.pos < text.len() {
            let found = p.token_at(p.pos);
            return Err(p.error(p.pos, ExprErrorKind::Trailing(found)));
        }
        Ok(expr)
    }

    /// Evaluates the expression for one request. `mode` is the `matchWildcardtoany` setting,
    /// applied in [`Context::Expression`].
    /// Whether the expression reads the question name (`QUESTION.DOMAIN.EQ`): then two
    /// domains with the same services may still be decided differently.
    pub fn reads_name(&self) -> bool {
        match self {
            Expr::DomainEq(_) => true,
            Expr::Not(e) => e.reads_name(),
            Expr::And(a, b) | Expr::Or(a, b) => a.reads_name() || b.reads_name(),
            Expr::Const(_) | Expr::MatchesLocation(_) | Expr::InSubnet(_) | Expr::TypeEq(_) => {
                false
            }
        }
    }

    /// Every location a `MATCHES_LOCATION` of the expression names, appended to `out`.
    pub fn locations<'a>(&'a self, out: &mut Vec<&'a Location>) {
        match self {
            Expr::MatchesLocation(l) => out.push(l),
            Expr::Not(e) => e.locations(out),
            Expr::And(a, b) | Expr::Or(a, b) => {
                a.locations(out);
                b.locations(out);
            }
            Expr::Const(_) | Expr::InSubnet(_) | Expr::DomainEq(_) | Expr::TypeEq(_) => {}
        }
    }

    /// Every prefix an `IN_SUBNET` of the expression names, appended to `out`.
    pub fn subnets(&self, out: &mut Vec<IpNet>) {
        match self {
            Expr::InSubnet(net) => out.push(*net),
            Expr::Not(e) => e.subnets(out),
            Expr::And(a, b) | Expr::Or(a, b) => {
                a.subnets(out);
                b.subnets(out);
            }
            Expr::Const(_) | Expr::MatchesLocation(_) | Expr::DomainEq(_) | Expr::TypeEq(_) => {}
        }
    }

    pub fn eval(&self, req: &Request<'_>, mode: WildcardMode) -> bool {
        match self {
            Expr::Const(b) => *b,
            // A client missing from the database has no location: treating it as all
            // wildcards would make it match every pattern under the default wildcard mode.
            Expr::MatchesLocation(pattern) => req
                .location
                .is_some_and(|l| l.matches(pattern, mode, Context::Expression) == Match::Perfect),
            Expr::InSubnet(net) => net.contains(&canonical(req.client)),
            Expr::DomainEq(name) => {
                let q = req.qname.strip_suffix('.').unwrap_or(req.qname);
                q.eq_ignore_ascii_case(name)
            }
            Expr::TypeEq(t) => req.qtype == *t,
            Expr::Not(e) => !e.eval(req, mode),
            Expr::And(a, b) => a.eval(req, mode) && b.eval(req, mode),
            Expr::Or(a, b) => a.eval(req, mode) || b.eval(req, mode),
        }
    }
}

/// An IPv4-mapped IPv6 address is the IPv4 client it stands for (dual-stack sockets report
/// IPv4 clients that way).
pub(crate) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 @ IpAddr::V4(_) => v4,
    }
}

/// Prints in the syntax [`Expr::parse`] reads, fully parenthesised.
impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Const(true) => f.write_str("TRUE"),
            Expr::Const(false) => f.write_str("FALSE"),
            Expr::MatchesLocation(l) => {
                let shown = l.to_string().replace('\\', "\\\\").replace('"', "\\\"");
                write!(f, "CLIENT.IP.SRC.MATCHES_LOCATION(\"{shown}\")")
            }
            Expr::InSubnet(IpNet::V4(n)) => write!(f, "CLIENT.IP.SRC.IN_SUBNET({n})"),
            Expr::InSubnet(IpNet::V6(n)) => write!(f, "CLIENT.IPV6.SRC.IN_SUBNET({n})"),
            Expr::DomainEq(d) => write!(f, "DNS.REQ.QUESTION.DOMAIN.EQ(\"{d}\")"),
            Expr::TypeEq(t) => match QTYPES.iter().find(|(_, v)| v == t) {
                Some((name, _)) => write!(f, "DNS.REQ.QUESTION.TYPE.EQ({name})"),
                None => write!(f, "DNS.REQ.QUESTION.TYPE.EQ({t})"),
            },
            Expr::Not(e) => write!(f, "!{e}"),
            Expr::And(a, b) => write!(f, "({a} && {b})"),
            Expr::Or(a, b) => write!(f, "({a} || {b})"),
        }
    }
}

/// A syntax error in an expression.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("column {column}: {kind}")]
pub struct ExprError {
    /// Byte offset of the offending text in the expression.
    pub offset: usize,
    /// 1-based character column of the same place.
    pub column: usize,
    pub kind: ExprErrorKind,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ExprErrorKind {
    #[error("the expression is empty")]
    Empty,
    #[error("expected {expected}, found the end of the expression")]
    UnexpectedEnd { expected: &'static str },
    #[error("expected {expected}, found {found}")]
    Unexpected {
        expected: &'static str,
        found: String,
    },
    #[error("{0} after the end of the expression (join conditions with && or ||)")]
    Trailing(String),
    #[error("single {0:?}: write {0}{0}")]
    SingleOperator(char),
    #[error("unknown function {0} (known: {FUNCTIONS})")]
    UnknownFunction(String),
    #[error("{0} takes one argument")]
    Arity(String),
    #[error("unterminated string")]
    UnterminatedString,
    #[error("{function}: {reason}")]
    BadArgument {
        function: &'static str,
        reason: String,
    },
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

/// One argument as written: a quoted string (unescaped) or bare text, with its offset.
enum Arg {
    Quoted(String, usize),
    Bare(String, usize),
}

impl Parser<'_> {
    fn error(&self, offset: usize, kind: ExprErrorKind) -> ExprError {
        let column = self.text[..offset].chars().count() + 1;
        ExprError {
            offset,
            column,
            kind,
        }
    }

    fn rest(&self) -> &str {
        &self.text[self.pos..]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_space(&mut self) {
        let trimmed = self.rest().trim_start();
        self.pos = self.text.len() - trimmed.len();
    }

    /// A short description of the text at `at`, for messages.
    fn token_at(&self, at: usize) -> String {
        let rest = &self.text[at..];
        let word: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '.')
            .collect();
        if word.is_empty() {
            rest.chars()
                .next()
                .map_or_else(|| "the end".into(), |c| format!("{c:?}"))
        } else {
            format!("{word:?}")
        }
    }

    fn unexpected(&self, expected: &'static str) -> ExprError {
        if self.pos == self.text.len() {
            self.error(self.pos, ExprErrorKind::UnexpectedEnd { expected })
        } else {
            self.error(
                self.pos,
                ExprErrorKind::Unexpected {
                    expected,
                    found: self.token_at(self.pos),
                },
            )
        }
    }

    /// Consumes `op` (after spaces) if it is next; a lone `&` or `|` is an error.
    fn operator(&mut self, op: &str) -> Result<bool, ExprError> {
        self.skip_space();
        if self.rest().starts_with(op) {
            self.pos += op.len();
            return Ok(true);
        }
        let c = op.chars().next().expect("operators are not empty");
        if self.peek() == Some(c) {
            return Err(self.error(self.pos, ExprErrorKind::SingleOperator(c)));
        }
        Ok(false)
    }

    fn or(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.and()?;
        while self.operator("||")? {
            left = Expr::Or(Box::new(left), Box::new(self.and()?));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ExprError> {
        let mut left = self.unary()?;
        while self.operator("&&")? {
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ExprError> {
        self.skip_space();
        if self.peek() == Some('!') {
            self.pos += 1;
            return Ok(Expr::Not(Box::new(self.unary()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Expr, ExprError> {
        self.skip_space();
        if self.peek() == Some('(') {
            self.pos += 1;
            let inner = self.or()?;
            self.skip_space();
            if self.peek() != Some(')') {
                return Err(self.unexpected("')'"));
            }
            self.pos += 1;
            return Ok(inner);
        }
        let start = self.pos;
        let path = self.path()?;
        self.skip_space();
        let upper = path.to_ascii_uppercase();
        if self.peek() != Some('(') {
            return match upper.as_str() {
                "TRUE" => Ok(Expr::Const(true)),
                "FALSE" => Ok(Expr::Const(false)),
                _ if known(&upper) => Err(self.unexpected("'(' and the argument")),
                _ => Err(self.error(start, ExprErrorKind::UnknownFunction(path))),
            };
        }
        if !known(&upper) {
            return Err(self.error(start, ExprErrorKind::UnknownFunction(path)));
        }
        self.pos += 1;
        let arg = self.argument()?;
        self.skip_space();
        match self.peek() {
            Some(')') => self.pos += 1,
            Some(',') => return Err(self.error(self.pos, ExprErrorKind::Arity(path))),
            _ => return Err(self.unexpected("')'")),
        }
        self.call(&upper, arg)
    }

    /// Dotted identifiers: `CLIENT.IP.SRC.IN_SUBNET`.
    fn path(&mut self) -> Result<String, ExprError> {
        let start = self.pos;
        loop {
            let len = self
                .rest()
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(self.rest().len());
            if len == 0 {
                return Err(self.unexpected("a condition such as CLIENT.IP.SRC.IN_SUBNET(…)"));
            }
            self.pos += len;
            if self.peek() == Some('.') {
                self.pos += 1;
            } else {
                return Ok(self.text[start..self.pos].to_owned());
            }
        }
    }

    fn argument(&mut self) -> Result<Arg, ExprError> {
        self.skip_space();
        let start = self.pos;
        if self.peek() == Some('"') {
            self.pos += 1;
            let mut value = String::new();
            let mut chars = self.rest().char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '"' => {
                        self.pos += i + 1;
                        return Ok(Arg::Quoted(value, start));
                    }
                    // `\"` keeps a quoted location qualifier inside the string.
                    '\\' => match chars.next() {
                        Some((_, e)) => value.push(e),
                        None => break,
                    },
                    c => value.push(c),
                }
            }
            return Err(self.error(start, ExprErrorKind::UnterminatedString));
        }
        let len = self
            .rest()
            .find([')', ',', '(', '"'])
            .unwrap_or(self.rest().len());
        let value = self.rest()[..len].trim_end().to_owned();
        if value.is_empty() {
            return Err(self.unexpected("an argument"));
        }
        self.pos += len;
        Ok(Arg::Bare(value, start))
    }

    fn call(&self, function: &str, arg: Arg) -> Result<Expr, ExprError> {
        let bad = |function: &'static str, at: usize, reason: String| {
            self.error(at, ExprErrorKind::BadArgument { function, reason })
        };
        match function {
            "CLIENT.IP.SRC.MATCHES_LOCATION" | "CLIENT.IPV6.SRC.MATCHES_LOCATION" => {
                const F: &str = "MATCHES_LOCATION";
                match arg {
                    Arg::Quoted(s, at) => Location::parse(&s)
                        .map(Expr::MatchesLocation)
                        .map_err(|reason| bad(F, at, format!("location {s:?}: {reason}"))),
                    Arg::Bare(s, at) => Err(bad(
                        F,
                        at,
                        format!("quote the location: MATCHES_LOCATION(\"{s}\")"),
                    )),
                }
            }
            "CLIENT.IP.SRC.IN_SUBNET" | "CLIENT.IPV6.SRC.IN_SUBNET" => {
                const F: &str = "IN_SUBNET";
                let (s, at) = match arg {
                    Arg::Quoted(s, at) | Arg::Bare(s, at) => (s, at),
                };
                let net: IpNet = s.parse().map_err(|_| {
                    bad(
                        F,
                        at,
                        format!("{s:?} is not a subnet (address/length, e.g. 198.51.100.0/24)"),
                    )
                })?;
                if net.trunc() != net {
                    return Err(bad(
                        F,
                        at,
                        format!("{net} has host bits set (did you mean {}?)", net.trunc()),
                    ));
                }
                // NetScaler spells the families apart; accept a v6 subnet under CLIENT.IP too,
                // but not a v4 one under CLIENT.IPV6, which could never match.
                if function.starts_with("CLIENT.IPV6") && matches!(net, IpNet::V4(_)) {
                    return Err(bad(
                        F,
                        at,
                        format!("{net} is IPv4; use CLIENT.IP.SRC.IN_SUBNET"),
                    ));
                }
                Ok(Expr::InSubnet(net))
            }
            "DNS.REQ.QUESTION.DOMAIN.EQ" => {
                const F: &str = "DOMAIN.EQ";
                match arg {
                    Arg::Quoted(s, at) => {
                        let name = s.strip_suffix('.').unwrap_or(&s);
                        if name.is_empty() || name.split('.').any(str::is_empty) {
                            return Err(bad(F, at, format!("{s:?} is not a domain name")));
                        }
                        Ok(Expr::DomainEq(name.to_ascii_lowercase().into()))
                    }
                    Arg::Bare(s, at) => Err(bad(F, at, format!("quote the name: EQ(\"{s}\")"))),
                }
            }
            "DNS.REQ.QUESTION.TYPE.EQ" => {
                const F: &str = "TYPE.EQ";
                let (s, at) = match arg {
                    Arg::Bare(s, at) => (s, at),
                    Arg::Quoted(s, at) => {
                        return Err(bad(F, at, format!("write the type unquoted: EQ({s})")));
                    }
                };
                let by_name = QTYPES
                    .iter()
                    .find(|(n, _)| n.eq_ignore_ascii_case(&s))
                    .map(|(_, t)| *t);
                by_name
                    .or_else(|| s.parse().ok())
                    .map(Expr::TypeEq)
                    .ok_or_else(|| {
                        let names: Vec<&str> = QTYPES.iter().map(|(n, _)| *n).collect();
                        bad(
                            F,
                            at,
                            format!(
                                "unknown type {s:?} (known: {}, or a number)",
                                names.join(", ")
                            ),
                        )
                    })
            }
            _ => unreachable!("known() admitted {function}"),
        }
    }
}

fn known(upper: &str) -> bool {
    matches!(
        upper,
        "CLIENT.IP.SRC.MATCHES_LOCATION"
            | "CLIENT.IPV6.SRC.MATCHES_LOCATION"
            | "CLIENT.IP.SRC.IN_SUBNET"
            | "CLIENT.IPV6.SRC.IN_SUBNET"
            | "DNS.REQ.QUESTION.DOMAIN.EQ"
            | "DNS.REQ.QUESTION.TYPE.EQ"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loc(s: &str) -> Location {
        Location::parse(s).unwrap()
    }

    #[test]
    fn parses_the_netscaler_forms() {
        let ml = |s: &str| Expr::MatchesLocation(loc(s));
        let net = |s: &str| Expr::InSubnet(s.parse().unwrap());
        let not = |e| Expr::Not(Box::new(e));
        let and = |a, b| Expr::And(Box::new(a), Box::new(b));
        let or = |a, b| Expr::Or(Box::new(a), Box::new(b));
        let table = [
            (
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("*.ZMB.*.*")"#,
                ml("*.zmb"),
            ),
            (
                r#"client.ip.src.matches_location( "Europe.UK" )"#,
                ml("Europe.UK"),
            ),
            (
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("Europe.UK.\"St. Albans\"")"#,
                ml("Europe.UK.\"St. Albans\""),
            ),
            ("CLIENT.IP.SRC.IN_SUBNET(10.0.0.0/8)", net("10.0.0.0/8")),
            (
                "CLIENT.IP.SRC.IN_SUBNET(2001:db8::/32)",
                net("2001:db8::/32"),
            ),
            (
                "CLIENT.IPV6.SRC.IN_SUBNET( 2001:db8::/32 )",
                net("2001:db8::/32"),
            ),
            (
                r#"DNS.REQ.QUESTION.DOMAIN.EQ("WWW.Example.com.")"#,
                Expr::DomainEq("www.example.com".into()),
            ),
            ("DNS.REQ.QUESTION.TYPE.EQ(A)", Expr::TypeEq(1)),
            ("dns.req.question.type.eq(aaaa)", Expr::TypeEq(28)),
            ("DNS.REQ.QUESTION.TYPE.EQ(65)", Expr::TypeEq(65)),
            ("true", Expr::Const(true)),
            ("!FALSE", not(Expr::Const(false))),
            ("!!TRUE", not(not(Expr::Const(true)))),
            // && binds tighter than ||, ! tighter than both; both associate to the left.
            (
                "TRUE || FALSE && FALSE",
                or(
                    Expr::Const(true),
                    and(Expr::Const(false), Expr::Const(false)),
                ),
            ),
            (
                "(TRUE || FALSE) && FALSE",
                and(
                    or(Expr::Const(true), Expr::Const(false)),
                    Expr::Const(false),
                ),
            ),
            (
                "!TRUE&&FALSE",
                and(not(Expr::Const(true)), Expr::Const(false)),
            ),
            (
                "TRUE||FALSE||TRUE",
                or(or(Expr::Const(true), Expr::Const(false)), Expr::Const(true)),
            ),
            (
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("*.ZMB.*.*") && !DNS.REQ.QUESTION.TYPE.EQ(AAAA)"#,
                and(ml("*.zmb"), not(Expr::TypeEq(28))),
            ),
        ];
        for (text, want) in table {
            let got = Expr::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(got, want, "{text}");
            // Display writes what parse reads.
            assert_eq!(
                Expr::parse(&got.to_string()).unwrap(),
                got,
                "{text} → {got}"
            );
        }
    }

    #[test]
    fn errors_name_the_column() {
        let table = [
            ("", 1, "the expression is empty"),
            ("   ", 4, "the expression is empty"),
            ("TRUE &", 6, "single '&': write &&"),
            ("TRUE | FALSE", 6, "single '|': write ||"),
            ("TRUE FALSE", 6, "\"FALSE\" after the end of the expression"),
            ("(TRUE", 6, "expected ')', found the end"),
            ("TRUE &&", 8, "expected a condition"),
            (
                "TRUE && )",
                9,
                "expected a condition such as CLIENT.IP.SRC.IN_SUBNET(…), found ')'",
            ),
            (
                "CLIENT.IP.DST.IN_SUBNET(10.0.0.0/8)",
                1,
                "unknown function CLIENT.IP.DST.IN_SUBNET",
            ),
            (
                "CLIENT.IP.SRC.IN_SUBNET",
                24,
                "expected '(' and the argument",
            ),
            (
                "CLIENT.IP.SRC.IN_SUBNET(10.0.0.1/8)",
                25,
                "10.0.0.1/8 has host bits set (did you mean 10.0.0.0/8?)",
            ),
            (
                "CLIENT.IP.SRC.IN_SUBNET(10.0.0.0)",
                25,
                "\"10.0.0.0\" is not a subnet",
            ),
            (
                "CLIENT.IPV6.SRC.IN_SUBNET(10.0.0.0/8)",
                27,
                "is IPv4; use CLIENT.IP.SRC.IN_SUBNET",
            ),
            (
                "CLIENT.IP.SRC.IN_SUBNET()",
                25,
                "expected an argument, found ')'",
            ),
            (
                "CLIENT.IP.SRC.IN_SUBNET(10.0.0.0/8, 1)",
                35,
                "takes one argument",
            ),
            (
                "DNS.REQ.QUESTION.DOMAIN.EQ(\"é\") || CLIENT.IP.SRC.MATCHES_LOCATION(\"a.b.c.d.e.f.g\")",
                67,
                "7 qualifiers, at most 6",
            ),
            (
                "CLIENT.IP.SRC.MATCHES_LOCATION(Europe)",
                32,
                "quote the location",
            ),
            (
                "CLIENT.IP.SRC.MATCHES_LOCATION(\"Europe)",
                32,
                "unterminated string",
            ),
            (
                "DNS.REQ.QUESTION.TYPE.EQ(\"A\")",
                26,
                "write the type unquoted",
            ),
            (
                "DNS.REQ.QUESTION.TYPE.EQ(AAAAA)",
                26,
                "unknown type \"AAAAA\"",
            ),
            (
                "DNS.REQ.QUESTION.DOMAIN.EQ(\"a..b\")",
                28,
                "\"a..b\" is not a domain name",
            ),
            (
                "DNS.REQ.QUESTION.DOMAIN.EQ(www.example.com)",
                28,
                "quote the name",
            ),
            ("MAYBE", 1, "unknown function MAYBE"),
        ];
        for (text, column, reason) in table {
            let err = Expr::parse(text).expect_err(text);
            assert!(
                err.to_string().contains(reason),
                "{text:?}: {err} lacks {reason:?}"
            );
            assert_eq!(err.column, column, "{text:?}: {err}");
            assert_eq!(text[..err.offset].chars().count() + 1, column, "{text:?}");
        }
    }

    #[test]
    fn evaluates() {
        let zmb = loc("Africa.ZMB.Lusaka");
        let partial = loc("Africa"); // country unknown: a wildcard on the client's side
        let req = |client: &str, location, qname, qtype| Request {
            client: client.parse().unwrap(),
            location,
            qname,
            qtype,
        };
        let base = req("198.51.100.7", Some(&zmb), "WWW.example.com.", 1);
        let table: Vec<(&str, Request<'_>, WildcardMode, bool)> = vec![
            (
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("*.ZMB.*.*")"#,
                base,
                WildcardMode::Yes,
                true,
            ),
            (
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("*.UK")"#,
                base,
                WildcardMode::Yes,
                false,
            ),
            // A client without a location matches no location, not even under YES.
            (
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("*.ZMB")"#,
                req("198.51.100.7", None, "x", 1),
                WildcardMode::Yes,
                false,
            ),
            // The client's own wildcard (unknown country), per matchWildcardtoany.
            (
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("Africa.ZMB")"#,
                req("198.51.100.7", Some(&partial), "x", 1),
                WildcardMode::Yes,
                true,
            ),
            (
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("Africa.ZMB")"#,
                req("198.51.100.7", Some(&partial), "x", 1),
                WildcardMode::No,
                false,
            ),
            (
                r#"CLIENT.IP.SRC.MATCHES_LOCATION("Africa.ZMB")"#,
                req("198.51.100.7", Some(&partial), "x", 1),
                WildcardMode::Expression,
                true,
            ),
            (
                "CLIENT.IP.SRC.IN_SUBNET(198.51.100.0/24)",
                base,
                WildcardMode::Yes,
                true,
            ),
            (
                "CLIENT.IP.SRC.IN_SUBNET(198.51.101.0/24)",
                base,
                WildcardMode::Yes,
                false,
            ),
            // A v4-mapped client is the v4 client.
            (
                "CLIENT.IP.SRC.IN_SUBNET(198.51.100.0/24)",
                req("::ffff:198.51.100.7", None, "x", 1),
                WildcardMode::Yes,
                true,
            ),
            (
                "CLIENT.IPV6.SRC.IN_SUBNET(2001:db8::/32)",
                req("2001:db8::1", None, "x", 1),
                WildcardMode::Yes,
                true,
            ),
            (
                "CLIENT.IPV6.SRC.IN_SUBNET(2001:db8::/32)",
                base,
                WildcardMode::Yes,
                false,
            ),
            (
                r#"DNS.REQ.QUESTION.DOMAIN.EQ("www.example.com")"#,
                base,
                WildcardMode::Yes,
                true,
            ),
            (
                r#"DNS.REQ.QUESTION.DOMAIN.EQ("example.com")"#,
                base,
                WildcardMode::Yes,
                false,
            ),
            ("DNS.REQ.QUESTION.TYPE.EQ(A)", base, WildcardMode::Yes, true),
            (
                "DNS.REQ.QUESTION.TYPE.EQ(AAAA)",
                base,
                WildcardMode::Yes,
                false,
            ),
            (
                "!DNS.REQ.QUESTION.TYPE.EQ(AAAA) && CLIENT.IP.SRC.IN_SUBNET(198.51.0.0/16)",
                base,
                WildcardMode::Yes,
                true,
            ),
            (
                "DNS.REQ.QUESTION.TYPE.EQ(AAAA) || CLIENT.IP.SRC.IN_SUBNET(10.0.0.0/8)",
                base,
                WildcardMode::Yes,
                false,
            ),
            (
                "!(DNS.REQ.QUESTION.TYPE.EQ(AAAA) || CLIENT.IP.SRC.IN_SUBNET(10.0.0.0/8))",
                base,
                WildcardMode::Yes,
                true,
            ),
        ];
        for (text, req, mode, want) in table {
            let expr = Expr::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(expr.eval(&req, mode), want, "{text} {mode:?} {req:?}");
        }
    }
}
