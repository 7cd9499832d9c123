//! Random configurations (views, policies, method chains, limits) compiled to the engine's
//! answers, and answered so by XDP.

use proptest::prelude::Rng;
use proptest::test_runner::{RngAlgorithm, TestRng};

use super::xdp::{ask_xdp, dataplane, sample};
use super::{World, check, clients};

// ---- Random configurations: views, policies and methods together ----

/// Configurations drawn at random (seeded) over the common world: static views, DNS policies
/// and domains of every compiled method with per-view services. The defect this guards
/// against: a view's services silently replaced by the domain's own as soon as anything made
/// the engine decide (a policy, a method, a chain, a limit).
const RANDOM_CONFIGS: u64 = 24;
const RANDOM_CLIENTS: usize = 4_000;
const RANDOM_XDP_CLIENTS: usize = 150;

/// Services of `COMMON`, and those with a spillover limit (which make the engine decide).
const POOL: [&str; 14] = [
    "eu-1", "eu-1-alt", "eu-2", "eu-6", "us-1", "us-2", "us-6", "bw-6", "ap-1", "ap-2", "ap-6",
    "ap-6b", "full-1", "full-2",
];
const LIMITED: [&str; 5] = ["eu-1", "us-1", "bw-6", "full-1", "full-2"];
const VIEW_PREFIXES: [&str; 13] = [
    "10.0.0.0/8",
    "10.1.0.0/16",
    "10.1.2.0/24",
    "10.1.2.128/26",
    "192.168.0.0/16",
    "198.51.100.0/25",
    "203.0.113.0/24",
    "172.16.0.0/12",
    "0.0.0.0/1",
    "2001:db8:4400::/40",
    "2001:db8:8000::/33",
    "2001:db8:4000::/36",
    "::/0",
];
const POLICIES: [(&str, &str); 6] = [
    (r#"CLIENT.IP.SRC.MATCHES_LOCATION("Asia.*")"#, "prefer-asia"),
    ("CLIENT.IP.SRC.IN_SUBNET(10.1.0.0/16)", "prefer-uk"),
    (
        r#"CLIENT.IP.SRC.MATCHES_LOCATION("Europe.UK")"#,
        "prefer-de",
    ),
    ("CLIENT.IPV6.SRC.IN_SUBNET(2001:db8:4000::/36)", "prefer-us"),
    // Matches nobody: its mere presence once made every view vanish.
    ("CLIENT.IP.SRC.IN_SUBNET(100.64.0.0/10)", "prefer-hk"),
    ("DNS.REQ.QUESTION.TYPE.EQ(AAAA)", "prefer-hk"),
];
const ACTIONS: &str = r#"
[[action]]
name = "prefer-hk"
preferred_locations = ["Asia.HK", "Asia.JP"]
[[action]]
name = "prefer-asia"
preferred_locations = ["Asia.JP.Tokyo", "Asia.HK"]
[[action]]
name = "prefer-uk"
preferred_locations = ["Europe.UK"]
[[action]]
name = "prefer-us"
preferred_locations = ["NorthAmerica.US.VA", "NorthAmerica"]
[[action]]
name = "prefer-de"
preferred_locations = ["Europe.DE"]
"#;
/// Method chains (preferred, alternate, fallback) the compiler decides per class.
const CHAINS: [&[&str]; 10] = [
    &["roundrobin"],
    &["ratio"],
    &["leastconnection"],
    &["globalavailability"],
    &["staticproximity"],
    &["staticproximity", "ratio"],
    &["rtt", "topology", "globalavailability"],
    &["topology", "roundrobin"],
    &["rtt"],
    &["topology", "staticproximity", "leastconnection"],
];

/// One random configuration's text, and the domains the compiler answers by static view (round
/// robin with nothing else to decide).
fn random_config(rng: &mut TestRng) -> (String, Vec<String>) {
    let mut pick = |n: usize| rng.next_u32() as usize % n;
    let mut text = String::new();
    // 1 to 4 views; no prefix in two views.
    let mut prefixes: Vec<&str> = VIEW_PREFIXES.to_vec();
    let views = 1 + pick(4);
    for v in 0..views {
        let mut mine = Vec::new();
        for _ in 0..=pick(3) {
            if !prefixes.is_empty() {
                mine.push(prefixes.swap_remove(pick(prefixes.len())));
            }
        }
        let list: Vec<String> = mine.iter().map(|p| format!("\"{p}\"")).collect();
        text += &format!(
            "[[view]]\nname = \"v{v}\"\nprefixes = [{}]\n",
            list.join(", ")
        );
    }
    let policies = [0, 0, 1, 1, 2, 3][pick(6)];
    if policies > 0 {
        text += ACTIONS;
    }
    let mut used = Vec::new();
    for p in 0..policies {
        let mut i = pick(POLICIES.len());
        while used.contains(&i) {
            i = (i + 1) % POLICIES.len();
        }
        used.push(i);
        let (expression, action) = POLICIES[i];
        text += &format!(
            "[[policy]]\nname = \"p{p}\"\nexpression = '{expression}'\naction = \"{action}\"\npriority = {}\n",
            10 * (p + 1)
        );
    }
    let mut static_domains = Vec::new();
    for d in 0..2 + pick(4) {
        let chain = CHAINS[pick(CHAINS.len())];
        let name = format!("d{d}.example.com");
        let mut services: Vec<&str> = Vec::new();
        for _ in 0..2 + pick(5) {
            let s = POOL[pick(POOL.len())];
            if !services.contains(&s) {
                services.push(s);
            }
        }
        let quoted = |list: &[&str]| {
            list.iter()
                .map(|s| format!("\"{s}\""))
                .collect::<Vec<_>>()
                .join(", ")
        };
        text += &format!(
            "[[gslb_domain]]\nname = \"{name}\"\nttl = {}\nservices = [{}]\nmethod = \"{}\"\n",
            10 + d,
            quoted(&services),
            chain[0]
        );
        for (key, m) in ["alternate", "fallback"].iter().zip(&chain[1..]) {
            text += &format!("{key} = \"{m}\"\n");
        }
        if chain.contains(&"rtt") && pick(2) == 0 {
            text += "tolerance_ms = 5\n";
        }
        // (answer = "all" is refused after a method that picks one service per answer.)
        if pick(4) == 0 && !["ratio", "globalavailability"].contains(&chain[0]) {
            text += "answer = \"all\"\n";
        }
        if pick(3) == 0 {
            text += "backup_ip = [\"192.0.2.250\", \"2001:db8::250\"]\n";
        }
        // A window of 2 to 4 addresses an answer (refused where it never acts: global
        // availability alone).
        if pick(3) == 0 && chain != ["globalavailability"] {
            text += &format!("max_answers = {}\n", 2 + pick(3));
        }
        let mut limited = services.iter().any(|s| LIMITED.contains(s));
        for v in 0..views {
            if pick(3) == 0 {
                continue;
            }
            let mut list: Vec<&str> = Vec::new();
            for _ in 0..=pick(3) {
                let s = POOL[pick(POOL.len())];
                if !list.contains(&s) {
                    list.push(s);
                }
            }
            limited |= list.iter().any(|s| LIMITED.contains(s));
            text += &format!(
                "[[gslb_domain.view]]\nview = \"v{v}\"\nservices = [{}]\n",
                quoted(&list)
            );
        }
        if chain == ["roundrobin"] && policies == 0 && !limited {
            static_domains.push(name);
        }
    }
    (text, static_domains)
}

fn random_worlds() -> Vec<(World, u64)> {
    (0..RANDOM_CONFIGS)
        .map(|seed| {
            let mut rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[seed as u8 + 100; 32]);
            let (text, static_domains) = random_config(&mut rng);
            let name: &'static str = Box::leak(format!("random-{seed}").into_boxed_str());
            let statics: Vec<&str> = static_domains.iter().map(String::as_str).collect();
            let world = World::new(name, &text, &statics);
            (world, seed)
        })
        .collect()
}

#[test]
fn random_configurations_with_views_and_policies_compile_to_the_engines_answers() {
    let mut in_view_answers = 0;
    for (world, seed) in random_worlds() {
        let clients = clients(&world, seed as u8 + 10, RANDOM_CLIENTS);
        let check = check(&world, &clients);
        assert!(
            check.mismatches.is_empty(),
            "{}: {} mismatches, the first: {:#?}\nconfiguration:\n{}",
            world.name,
            check.mismatches.len(),
            check.mismatches.first(),
            world
                .config
                .gslb_domains
                .iter()
                .map(|d| format!(
                    "{} {:?} {:?} views {:?}",
                    d.name,
                    d.chain(),
                    d.services,
                    d.views
                ))
                .collect::<Vec<_>>()
                .join("\n")
        );
        // Clients in a view got the view's own services from the engine somewhere.
        in_view_answers += world
            .snapshot
            .domains
            .iter()
            .filter(|d| d.answers.len() > 1)
            .count();
    }
    assert!(
        in_view_answers >= RANDOM_CONFIGS as usize,
        "only {in_view_answers} entries answer differently per view"
    );
}

#[test]
fn xdp_answers_random_configurations_as_the_engine() {
    let mut answered = 0;
    for (world, seed) in random_worlds().into_iter().step_by(3) {
        let Some(dp) = dataplane(&world) else { return };
        let clients = clients(&world, seed as u8 + 10, RANDOM_CLIENTS);
        answered += ask_xdp(&dp, &world, &sample(&clients, RANDOM_XDP_CLIENTS)).0;
    }
    assert!(answered > 0, "the fast path answered nothing");
}
