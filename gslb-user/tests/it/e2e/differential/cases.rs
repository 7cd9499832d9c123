//! The matrix: every query the three servers are asked, written on the wire by hand (most of
//! them no DNS library would write), each with a name the allow-list and docs/security.md
//! refer to. The names are those of [`super::config`] (`gslb_tests::responder_config`).

/// One request of the matrix.
pub(super) struct Case {
    /// Its name in the report, the allow-list and docs/security.md.
    pub(super) name: String,
    pub(super) request: Vec<u8>,
    /// Also sent over TCP (as `NAME/tcp`).
    pub(super) tcp: bool,
}

/// The ID of every request.
pub(super) const ID: u16 = 0x2b4d;

const A: u16 = 1;
const NS: u16 = 2;
const SOA: u16 = 6;
const TXT: u16 = 16;
const AAAA: u16 = 28;
const OPT: u16 = 41;
const IXFR: u16 = 251;
const AXFR: u16 = 252;
const ANY: u16 = 255;
const IN: u16 = 1;
const CH: u16 = 3;
const CLASS_NONE: u16 = 254;
const CLASS_ANY: u16 = 255;

/// The header's second and third bytes.
const RD: (usize, u8) = (0, 0x01);
const TC: (usize, u8) = (0, 0x02);
const Z: (usize, u8) = (1, 0x40);
const AD: (usize, u8) = (1, 0x20);
const CD: (usize, u8) = (1, 0x10);

/// An OPT record's fields (RFC 6891 §6.1.2).
#[derive(Clone)]
struct Edns {
    payload: u16,
    version: u8,
    /// The 16 flag bits: DO and Z.
    flags: u16,
    options: Vec<(u16, Vec<u8>)>,
}

const DO: u16 = 0x8000;

/// Plain EDNS0: payload 1232, no flag, no option.
fn edns0() -> Edns {
    Edns {
        payload: 1232,
        version: 0,
        flags: 0,
        options: vec![],
    }
}

impl Edns {
    fn version(mut self, version: u8) -> Self {
        self.version = version;
        self
    }
    fn flags(mut self, flags: u16) -> Self {
        self.flags = flags;
        self
    }
    fn payload(mut self, payload: u16) -> Self {
        self.payload = payload;
        self
    }
    fn option(mut self, code: u16, data: &[u8]) -> Self {
        self.options.push((code, data.to_vec()));
        self
    }
    fn record(&self) -> Vec<u8> {
        let mut rdata = Vec::new();
        for (code, data) in &self.options {
            rdata.extend_from_slice(&code.to_be_bytes());
            rdata.extend_from_slice(&(data.len() as u16).to_be_bytes());
            rdata.extend_from_slice(data);
        }
        let mut ttl = [0u8; 4];
        ttl[1] = self.version;
        ttl[2..].copy_from_slice(&self.flags.to_be_bytes());
        record(&[0], OPT, self.payload, ttl, &rdata)
    }
}

/// `name` (dotted, case kept) on the wire.
fn name(dotted: &str) -> Vec<u8> {
    let mut wire = Vec::new();
    for label in dotted.split('.').filter(|l| !l.is_empty()) {
        wire.push(label.len() as u8);
        wire.extend_from_slice(label.as_bytes());
    }
    wire.push(0);
    wire
}

/// A resource record with its owner on the wire.
fn record(owner: &[u8], rtype: u16, class: u16, ttl: [u8; 4], rdata: &[u8]) -> Vec<u8> {
    let mut rr = owner.to_vec();
    rr.extend_from_slice(&rtype.to_be_bytes());
    rr.extend_from_slice(&class.to_be_bytes());
    rr.extend_from_slice(&ttl);
    rr.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    rr.extend_from_slice(rdata);
    rr
}

/// A request being written: header bytes 2 and 3, then the sections as records on the wire.
#[derive(Clone)]
struct Query {
    flags: [u8; 2],
    sections: [Vec<Vec<u8>>; 4],
}

impl Query {
    /// No question, no record.
    fn empty() -> Query {
        Query {
            flags: [0; 2],
            sections: Default::default(),
        }
    }
    /// One question of class IN.
    fn new(qname: &str, qtype: u16) -> Query {
        Query::class(qname, qtype, IN)
    }
    fn class(qname: &str, qtype: u16, class: u16) -> Query {
        Query::empty().question(qname, qtype, class)
    }
    fn question(mut self, qname: &str, qtype: u16, class: u16) -> Query {
        let mut q = name(qname);
        q.extend_from_slice(&qtype.to_be_bytes());
        q.extend_from_slice(&class.to_be_bytes());
        self.sections[0].push(q);
        self
    }
    fn opcode(mut self, opcode: u8) -> Query {
        self.flags[0] = (self.flags[0] & !0x78) | opcode << 3;
        self
    }
    fn set(mut self, (byte, mask): (usize, u8)) -> Query {
        self.flags[byte] |= mask;
        self
    }
    fn edns(self, edns: &Edns) -> Query {
        self.add(3, edns.record())
    }
    /// `rr` appended to section `section` (1 answer, 2 authority, 3 additional).
    fn add(mut self, section: usize, rr: Vec<u8>) -> Query {
        self.sections[section].push(rr);
        self
    }
    fn wire(&self) -> Vec<u8> {
        let mut m = ID.to_be_bytes().to_vec();
        m.extend_from_slice(&self.flags);
        for section in &self.sections {
            m.extend_from_slice(&(section.len() as u16).to_be_bytes());
        }
        for rr in self.sections.iter().flatten() {
            m.extend_from_slice(rr);
        }
        m
    }
}

/// A resolver's plain query for `qname` `qtype` (class IN, EDNS0 with a 1232-byte payload).
pub(super) fn plain(qname: &str, qtype: u16) -> Vec<u8> {
    Query::new(qname, qtype).edns(&edns0()).wire()
}

/// An A record owned by the root, for the sections a query must not have.
fn a_record() -> Vec<u8> {
    record(&[0], A, IN, [0; 4], &[192, 0, 2, 1])
}

/// The longest name there is (255 bytes on the wire) below example.com, in mixed case.
fn longest_name() -> String {
    // example.com is 13 bytes; three 63-byte labels (192) and one of 49 (50) make 255.
    let label = |c: char, n: usize| c.to_string().repeat(n);
    format!(
        "{}.{}.{}.{}.eXample.com",
        label('A', 63),
        label('b', 63),
        label('C', 63),
        label('d', 49)
    )
}

/// The matrix.
pub(super) fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut add = |name: &str, query: Query, tcp: bool| {
        cases.push(Case {
            name: name.to_owned(),
            request: query.wire(),
            tcp,
        });
    };
    let soa = || Query::new("example.com", SOA);
    let edns1 = || edns0().version(1);
    // RFC 8906 §8.1: plain DNS.
    add("soa", soa(), true);
    add("type1000", Query::new("example.com", 1000), false);
    add("cd", soa().set(CD), false);
    add("ad", soa().set(AD), false);
    add("z", soa().set(Z), false);
    add("opcode15-header-only", Query::empty().opcode(15), true);
    // RFC 8906 §8.2: EDNS.
    add("edns0", soa().edns(&edns0()), true);
    add("edns1", soa().edns(&edns1()), true);
    add(
        "edns-option100",
        soa().edns(&edns0().option(100, &[])),
        false,
    );
    add("edns-flag0x40", soa().edns(&edns0().flags(0x40)), false);
    add("edns1-flag0x40", soa().edns(&edns1().flags(0x40)), false);
    add(
        "edns1-option100",
        soa().edns(&edns1().option(100, &[])),
        false,
    );
    let all_three = edns1().flags(0x40).option(100, &[]);
    add("edns1-flag0x40-option100", soa().edns(&all_three), false);
    let dnssec_512 = edns0().payload(512).flags(DO);
    add(
        "edns-truncated",
        Query::new("big.example.com", TXT).edns(&dnssec_512),
        false,
    );
    add("edns-do", soa().edns(&edns0().flags(DO)), false);
    // Unknown opcodes, NOTIFY (4) and UPDATE (5), with a question: the SOA query's.
    for opcode in 1..=15 {
        let tcp = matches!(opcode, 4 | 5 | 15);
        add(&format!("opcode{opcode}"), soa().opcode(opcode), tcp);
    }
    add("opcode4-header-only", Query::empty().opcode(4), false);
    // More header bits and EDNS corners.
    add("rd", soa().set(RD), false);
    add("tc", soa().set(TC), false);
    add(
        "z-ad-cd-edns",
        soa().set(Z).set(AD).set(CD).edns(&edns0()),
        false,
    );
    add("edns-flag0x0001", soa().edns(&edns0().flags(1)), false);
    add(
        "edns-flag0x4000-do",
        soa().edns(&edns0().flags(0x4000 | DO)),
        false,
    );
    add("edns2", soa().edns(&edns0().version(2)), false);
    add("edns255", soa().edns(&edns0().version(255)), false);
    let unknown = edns0().option(65001, b"data").option(100, &[1, 2, 3]);
    add("edns-options-unknown", soa().edns(&unknown), false);
    add("edns-nsid", soa().edns(&edns0().option(3, &[])), false);
    let cookie = edns0().option(10, &[1, 2, 3, 4, 5, 6, 7, 8]);
    add("edns-cookie", soa().edns(&cookie), false);
    add("edns-keepalive", soa().edns(&edns0().option(11, &[])), true);
    add(
        "edns-padding",
        soa().edns(&edns0().option(12, &[0; 8])),
        false,
    );
    add("edns-expire", soa().edns(&edns0().option(9, &[])), false);
    let subnet = edns0().option(8, &[0, 1, 24, 0, 198, 51, 100]);
    add(
        "edns-ecs",
        Query::new("all.example.com", A).edns(&subnet),
        false,
    );
    add(
        "edns-payload0",
        Query::new("big.example.com", TXT).edns(&edns0().payload(0)),
        false,
    );
    add(
        "edns-payload4096",
        Query::new("huge.example.com", TXT).edns(&edns0().payload(4096)),
        false,
    );
    add("big-no-edns", Query::new("big.example.com", TXT), true);
    // ANY (RFC 8482).
    add("any-apex", Query::new("example.com", ANY), true);
    add("any-a-aaaa", Query::new("ns1.example.com", ANY), false);
    add("any-nx", Query::new("nx.example.com", ANY), false);
    // Meta-types and types never asked.
    for (what, qtype) in [
        ("opt", OPT),
        ("tsig", 250),
        ("tkey", 249),
        ("maila", 254),
        ("mailb", 253),
        ("128", 128),
        ("200", 200),
        ("248", 248),
    ] {
        add(
            &format!("qtype-{what}"),
            Query::new("example.com", qtype),
            false,
        );
    }
    add("qtype-axfr", Query::new("example.com", AXFR), true);
    add("qtype-ixfr", Query::new("example.com", IXFR), true);
    // Classes.
    for qname in [
        "id.server",
        "version.bind",
        "hostname.bind",
        "version.server",
    ] {
        add(&format!("ch-{qname}"), Query::class(qname, TXT, CH), false);
    }
    add("ch-soa", Query::class("example.com", SOA, CH), false);
    add(
        "class-any",
        Query::class("example.com", SOA, CLASS_ANY),
        false,
    );
    let nx_any = Query::class("nx.example.com", A, CLASS_ANY);
    add("class-any-nxdomain", nx_any, false);
    add(
        "class-none",
        Query::class("example.com", SOA, CLASS_NONE),
        false,
    );
    add("class-hs", Query::class("example.com", SOA, 4), false);
    // Sections a query does not have.
    add("qdcount0", Query::empty(), true);
    add("qdcount0-edns", Query::empty().edns(&edns0()), false);
    let two = soa().question("example.com", NS, IN);
    add("qdcount2", two, true);
    add("answer-record", soa().add(1, a_record()), false);
    add("authority-record", soa().add(2, a_record()), false);
    add("opt-in-authority", soa().add(2, edns0().record()), false);
    add("two-opts", soa().edns(&edns0()).edns(&edns0()), false);
    add("a-record-in-additional", soa().add(3, a_record()), false);
    // Negative answers, names, case.
    add("nxdomain", Query::new("nx.example.com", A), true);
    add("nodata", Query::new("txt.example.com", A), false);
    add("nodata-gslb", Query::new("all.example.com", AAAA), false);
    add(
        "nodata-empty-non-terminal",
        Query::new("dept.example.com", A),
        false,
    );
    add("gslb", Query::new("all.example.com", A), true);
    // Static records beside GSLB names: all.example.com's TXT and MX, the GSLB apex
    // example.org's A, SOA, NS, MX and TXT (NSD and Knot serve the GSLB answer as static A
    // records at the same names).
    add("gslb-sibling-txt", Query::new("all.example.com", TXT), true);
    add("gslb-sibling-mx", Query::new("all.example.com", 15), false);
    add(
        "gslb-sibling-nodata",
        Query::new("all.example.com", 33),
        false,
    );
    add("gslb-apex-a", Query::new("example.org", A), true);
    add("gslb-apex-aaaa", Query::new("example.org", AAAA), false);
    add("gslb-apex-soa", Query::new("example.org", SOA), false);
    add("gslb-apex-ns", Query::new("example.org", NS), false);
    add("gslb-apex-mx", Query::new("example.org", 15), false);
    add("gslb-apex-txt", Query::new("example.org", TXT), false);
    // CNAME chains: to a GSLB name's missing type, into another zone, to nothing, in a
    // loop, into a delegation.
    add("cname-chain", Query::new("chain.example.com", TXT), false);
    add(
        "cname-other-zone",
        Query::new("to-org.example.com", A),
        false,
    );
    add(
        "cname-dangling",
        Query::new("dangling.example.com", A),
        false,
    );
    add("cname-loop", Query::new("loop1.example.com", A), false);
    add(
        "cname-into-delegation",
        Query::new("into-lab.example.com", A),
        false,
    );
    add("cname-out", Query::new("cdn.example.com", A), false);
    // A CNAME domain (NSD and Knot serve its answer as a static CNAME): followed into the
    // zone for A and AAAA, to the target's NODATA for TXT, and asked for itself.
    add("gslb-cname-a", Query::new("go.example.com", A), true);
    add("gslb-cname-aaaa", Query::new("go.example.com", AAAA), false);
    add(
        "gslb-cname-nodata",
        Query::new("go.example.com", TXT),
        false,
    );
    add("gslb-cname-itself", Query::new("go.example.com", 5), false);
    add("srv", Query::new("_sip._tcp.example.com", 33), false);
    add("mx", Query::new("example.com", 15), false);
    // The other record types (issue 29), written as zone files give them to NSD and Knot.
    add("caa", Query::new("example.com", 257), true);
    add("ptr", Query::new("ptr.example.com", 12), false);
    add("naptr", Query::new("naptr.example.com", 35), false);
    add("svcb", Query::new("svc.example.com", 64), false);
    add("https-gslb-apex", Query::new("example.org", 65), true);
    add(
        "tlsa",
        Query::new("_443._tcp.host.dept.example.com", 52),
        false,
    );
    add("sshfp", Query::new("host.dept.example.com", 44), false);
    add("ds-at-delegation", Query::new("lab.example.com", 43), true);
    add(
        "ds-below-delegation",
        Query::new("x.lab.example.com", 43),
        false,
    );
    add("ds-nodata", Query::new("ns1.example.com", 43), false);
    add(
        "type-unknown",
        Query::new("unknown.example.com", 65534),
        false,
    );
    add(
        "type-unknown-nodata",
        Query::new("txt.example.com", 65534),
        false,
    );
    // Wildcards (RFC 4592 §2.2.1's examples under wild.example.com).
    add(
        "wildcard-mx",
        Query::new("host3.wild.example.com", 15),
        true,
    );
    add(
        "wildcard-nodata",
        Query::new("host3.wild.example.com", A),
        false,
    );
    add(
        "wildcard-deep",
        Query::new("foo.bar.wild.example.com", TXT),
        false,
    );
    add(
        "wildcard-any",
        Query::new("foo.wild.example.com", ANY),
        false,
    );
    add(
        "wildcard-existing-nodata",
        Query::new("host.wild.example.com", 15),
        false,
    );
    add(
        "wildcard-not-below-existing",
        Query::new("_telnet._tcp.host.wild.example.com", 33),
        false,
    );
    add(
        "wildcard-ghost",
        Query::new("ghost.*.wild.example.com", 15),
        false,
    );
    add(
        "wildcard-literal",
        Query::new("*.wild.example.com", TXT),
        false,
    );
    add(
        "wildcard-encloser",
        Query::new("wild.example.com", TXT),
        false,
    );
    add("wildcard-cname", Query::new("x.cw.example.com", A), false);
    add("wildcard-gslb", Query::new("a.gw.example.com", A), true);
    add(
        "wildcard-gslb-sibling",
        Query::new("a.b.gw.example.com", TXT),
        false,
    );
    add(
        "wildcard-gslb-nodata",
        Query::new("a.gw.example.com", AAAA),
        false,
    );
    add("ns", Query::new("example.com", NS), false);
    add("referral", Query::new("host.lab.example.com", A), false);
    add("not-ours", Query::new("www.example.net", A), false);
    add("case-gslb", Query::new("AlL.ExAmPlE.cOm", A), false);
    add("case-apex", Query::new("EXAMPLE.com", SOA), false);
    add("case-nxdomain", Query::new("Nx.ExAmple.COM", A), false);
    let longest = longest_name();
    add("name-255", Query::new(&longest, A), false);
    add(
        "name-255-edns",
        Query::new(&longest, A).edns(&edns0()),
        true,
    );
    cases
}
