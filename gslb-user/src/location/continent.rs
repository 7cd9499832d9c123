//! The continent of a country, for location files that give a country but no continent.
//!
//! NetScaler derives the continent qualifier from the country when a geographic location has
//! none ("If the geographic context is set with no Continent qualifier, Continent is derived
//! from Country"). Its built-in database (MaxMind GeoLite2 data) names the seven continents by
//! the codes `AF AN AS EU NA OC SA`; MaxMind's English names are `Africa`, `Antarctica`,
//! `Asia`, `Europe`, `North America`, `Oceania`, `South America`. Which of the two a derived
//! continent is written as follows `[locations] continent` (names by default), as for the
//! continents a MaxMind City database supplies, so that one database uses one spelling.
//!
//! The table assigns every ISO 3166-1 alpha-2 code the continent GeoNames (and so MaxMind)
//! gives it, plus codes that location data uses outside the standard: `XK` (Kosovo), `UK`
//! (the United Kingdom, as NetScaler's own examples write it), `EU` (Europe) and `AP`
//! (Asia/Pacific). Other codes (alpha-3 codes, `A1`/`A2`/`O1` pseudo-countries) have no
//! continent: the continent stays a wildcard.

use std::fmt;

/// One of the seven continents.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Continent {
    Africa,
    Antarctica,
    Asia,
    Europe,
    NorthAmerica,
    Oceania,
    SouthAmerica,
}

impl Continent {
    /// The two-letter code (`EU`), as NetScaler's built-in database writes it.
    pub fn code(self) -> &'static str {
        match self {
            Continent::Africa => "AF",
            Continent::Antarctica => "AN",
            Continent::Asia => "AS",
            Continent::Europe => "EU",
            Continent::NorthAmerica => "NA",
            Continent::Oceania => "OC",
            Continent::SouthAmerica => "SA",
        }
    }

    /// The English name (`North America`), as MaxMind City databases give it.
    pub fn name(self) -> &'static str {
        match self {
            Continent::Africa => "Africa",
            Continent::Antarctica => "Antarctica",
            Continent::Asia => "Asia",
            Continent::Europe => "Europe",
            Continent::NorthAmerica => "North America",
            Continent::Oceania => "Oceania",
            Continent::SouthAmerica => "South America",
        }
    }

    /// The continent of a two-letter country code (any case), if the table has it.
    pub fn of_country(code: &str) -> Option<Continent> {
        let code: [u8; 2] = code.as_bytes().try_into().ok()?;
        let code = code.map(|b| b.to_ascii_uppercase());
        COUNTRIES
            .binary_search_by(|(c, _)| c.as_bytes().cmp(&code[..]))
            .ok()
            .map(|i| COUNTRIES[i].1)
    }
}

/// How the continents gslbd supplies (a City database's, or one derived from a country) are
/// written as the continent qualifier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContinentStyle {
    /// The English name (`Europe`, `North America`).
    #[default]
    Name,
    /// The two-letter code (`EU`, `NA`).
    Code,
}

impl ContinentStyle {
    pub fn write(self, continent: Continent) -> &'static str {
        match self {
            ContinentStyle::Name => continent.name(),
            ContinentStyle::Code => continent.code(),
        }
    }
}

impl fmt::Display for Continent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

use Continent::{
    Africa as AF, Antarctica as AN, Asia as AS, Europe as EU, NorthAmerica as NA, Oceania as OC,
    SouthAmerica as SA,
};

/// Country code → continent, sorted by code (binary search; a test checks the order).
const COUNTRIES: [(&str, Continent); 253] = [
    ("AD", EU),
    ("AE", AS),
    ("AF", AS),
    ("AG", NA),
    ("AI", NA),
    ("AL", EU),
    ("AM", AS),
    ("AO", AF),
    ("AP", AS),
    ("AQ", AN),
    ("AR", SA),
    ("AS", OC),
    ("AT", EU),
    ("AU", OC),
    ("AW", NA),
    ("AX", EU),
    ("AZ", AS),
    ("BA", EU),
    ("BB", NA),
    ("BD", AS),
    ("BE", EU),
    ("BF", AF),
    ("BG", EU),
    ("BH", AS),
    ("BI", AF),
    ("BJ", AF),
    ("BL", NA),
    ("BM", NA),
    ("BN", AS),
    ("BO", SA),
    ("BQ", NA),
    ("BR", SA),
    ("BS", NA),
    ("BT", AS),
    ("BV", AN),
    ("BW", AF),
    ("BY", EU),
    ("BZ", NA),
    ("CA", NA),
    ("CC", AS),
    ("CD", AF),
    ("CF", AF),
    ("CG", AF),
    ("CH", EU),
    ("CI", AF),
    ("CK", OC),
    ("CL", SA),
    ("CM", AF),
    ("CN", AS),
    ("CO", SA),
    ("CR", NA),
    ("CU", NA),
    ("CV", AF),
    ("CW", NA),
    ("CX", OC),
    ("CY", EU),
    ("CZ", EU),
    ("DE", EU),
    ("DJ", AF),
    ("DK", EU),
    ("DM", NA),
    ("DO", NA),
    ("DZ", AF),
    ("EC", SA),
    ("EE", EU),
    ("EG", AF),
    ("EH", AF),
    ("ER", AF),
    ("ES", EU),
    ("ET", AF),
    ("EU", EU),
    ("FI", EU),
    ("FJ", OC),
    ("FK", SA),
    ("FM", OC),
    ("FO", EU),
    ("FR", EU),
    ("GA", AF),
    ("GB", EU),
    ("GD", NA),
    ("GE", AS),
    ("GF", SA),
    ("GG", EU),
    ("GH", AF),
    ("GI", EU),
    ("GL", NA),
    ("GM", AF),
    ("GN", AF),
    ("GP", NA),
    ("GQ", AF),
    ("GR", EU),
    ("GS", AN),
    ("GT", NA),
    ("GU", OC),
    ("GW", AF),
    ("GY", SA),
    ("HK", AS),
    ("HM", AN),
    ("HN", NA),
    ("HR", EU),
    ("HT", NA),
    ("HU", EU),
    ("ID", AS),
    ("IE", EU),
    ("IL", AS),
    ("IM", EU),
    ("IN", AS),
    ("IO", AS),
    ("IQ", AS),
    ("IR", AS),
    ("IS", EU),
    ("IT", EU),
    ("JE", EU),
    ("JM", NA),
    ("JO", AS),
    ("JP", AS),
    ("KE", AF),
    ("KG", AS),
    ("KH", AS),
    ("KI", OC),
    ("KM", AF),
    ("KN", NA),
    ("KP", AS),
    ("KR", AS),
    ("KW", AS),
    ("KY", NA),
    ("KZ", AS),
    ("LA", AS),
    ("LB", AS),
    ("LC", NA),
    ("LI", EU),
    ("LK", AS),
    ("LR", AF),
    ("LS", AF),
    ("LT", EU),
    ("LU", EU),
    ("LV", EU),
    ("LY", AF),
    ("MA", AF),
    ("MC", EU),
    ("MD", EU),
    ("ME", EU),
    ("MF", NA),
    ("MG", AF),
    ("MH", OC),
    ("MK", EU),
    ("ML", AF),
    ("MM", AS),
    ("MN", AS),
    ("MO", AS),
    ("MP", OC),
    ("MQ", NA),
    ("MR", AF),
    ("MS", NA),
    ("MT", EU),
    ("MU", AF),
    ("MV", AS),
    ("MW", AF),
    ("MX", NA),
    ("MY", AS),
    ("MZ", AF),
    ("NA", AF),
    ("NC", OC),
    ("NE", AF),
    ("NF", OC),
    ("NG", AF),
    ("NI", NA),
    ("NL", EU),
    ("NO", EU),
    ("NP", AS),
    ("NR", OC),
    ("NU", OC),
    ("NZ", OC),
    ("OM", AS),
    ("PA", NA),
    ("PE", SA),
    ("PF", OC),
    ("PG", OC),
    ("PH", AS),
    ("PK", AS),
    ("PL", EU),
    ("PM", NA),
    ("PN", OC),
    ("PR", NA),
    ("PS", AS),
    ("PT", EU),
    ("PW", OC),
    ("PY", SA),
    ("QA", AS),
    ("RE", AF),
    ("RO", EU),
    ("RS", EU),
    ("RU", EU),
    ("RW", AF),
    ("SA", AS),
    ("SB", OC),
    ("SC", AF),
    ("SD", AF),
    ("SE", EU),
    ("SG", AS),
    ("SH", AF),
    ("SI", EU),
    ("SJ", EU),
    ("SK", EU),
    ("SL", AF),
    ("SM", EU),
    ("SN", AF),
    ("SO", AF),
    ("SR", SA),
    ("SS", AF),
    ("ST", AF),
    ("SV", NA),
    ("SX", NA),
    ("SY", AS),
    ("SZ", AF),
    ("TC", NA),
    ("TD", AF),
    ("TF", AN),
    ("TG", AF),
    ("TH", AS),
    ("TJ", AS),
    ("TK", OC),
    ("TL", OC),
    ("TM", AS),
    ("TN", AF),
    ("TO", OC),
    ("TR", AS),
    ("TT", NA),
    ("TV", OC),
    ("TW", AS),
    ("TZ", AF),
    ("UA", EU),
    ("UG", AF),
    ("UK", EU),
    ("UM", OC),
    ("US", NA),
    ("UY", SA),
    ("UZ", AS),
    ("VA", EU),
    ("VC", NA),
    ("VE", SA),
    ("VG", NA),
    ("VI", NA),
    ("VN", AS),
    ("VU", OC),
    ("WF", OC),
    ("WS", OC),
    ("XK", EU),
    ("YE", AS),
    ("YT", AF),
    ("ZA", AF),
    ("ZM", AF),
    ("ZW", AF),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_has_every_iso_code_once() {
        assert!(
            COUNTRIES.windows(2).all(|w| w[0].0 < w[1].0),
            "COUNTRIES must be sorted without duplicates for the binary search"
        );
        // ISO 3166-1 assigns 249 alpha-2 codes; the table adds XK, UK, EU and AP.
        let extra = ["AP", "EU", "UK", "XK"];
        let iso = COUNTRIES.iter().filter(|(c, _)| !extra.contains(c)).count();
        assert_eq!(iso, 249);
        for (code, continent) in COUNTRIES {
            assert_eq!(Continent::of_country(code), Some(continent), "{code}");
        }
    }

    #[test]
    fn countries_map_to_their_continent_in_any_case() {
        let table = [
            ("GB", Some(Continent::Europe)),
            ("gb", Some(Continent::Europe)),
            ("Uk", Some(Continent::Europe)),
            ("US", Some(Continent::NorthAmerica)),
            ("MX", Some(Continent::NorthAmerica)),
            ("BR", Some(Continent::SouthAmerica)),
            ("JP", Some(Continent::Asia)),
            ("TR", Some(Continent::Asia)),
            ("RU", Some(Continent::Europe)),
            ("EG", Some(Continent::Africa)),
            ("AU", Some(Continent::Oceania)),
            ("AQ", Some(Continent::Antarctica)),
            ("ZMB", None),
            ("A1", None),
            ("", None),
            ("G", None),
            ("ÉU", None),
        ];
        for (code, want) in table {
            assert_eq!(Continent::of_country(code), want, "{code:?}");
        }
        assert_eq!(
            (
                Continent::NorthAmerica.code(),
                Continent::NorthAmerica.name()
            ),
            ("NA", "North America")
        );
        assert_eq!(Continent::Oceania.to_string(), "Oceania");
        assert_eq!(ContinentStyle::Code.write(Continent::Europe), "EU");
        assert_eq!(ContinentStyle::default().write(Continent::Europe), "Europe");
    }
}
