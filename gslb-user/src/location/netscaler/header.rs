//! The `NSGEO1.0` header of a location file (see [`super`]'s docs): marker and header lines,
//! and the columns its `QualifierN=` lines name.

use super::Col;

/// A line without a comma.
pub(super) enum Keyword<'a> {
    Tag,
    OtherTag,
    Start,
    End,
    Set(&'a str, &'a str),
    Other,
}

pub(super) fn keyword(text: &str) -> Keyword<'_> {
    if text.eq_ignore_ascii_case("NSGEO1.0") {
        Keyword::Tag
    } else if text
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case("NSGEO"))
    {
        Keyword::OtherTag
    } else if text.eq_ignore_ascii_case("Start") {
        Keyword::Start
    } else if text.eq_ignore_ascii_case("End") {
        Keyword::End
    } else if let Some((key, value)) = text.split_once('=') {
        Keyword::Set(key.trim(), value.trim())
    } else {
        Keyword::Other
    }
}

/// The `QualifierN=` lines of a header.
#[derive(Default)]
pub(super) struct HeaderColumns {
    pub custom: bool,
    /// Column N - 1 → (label, line).
    named: [Option<(String, usize)>; 6],
}

impl HeaderColumns {
    pub(super) fn set(&mut self, key: &str, label: &str, line: usize) -> Result<(), String> {
        let n = key
            .get(..9)
            .filter(|p| p.eq_ignore_ascii_case("qualifier"))
            .and_then(|_| key[9..].parse::<usize>().ok())
            .filter(|n| (1..=6).contains(n))
            .ok_or_else(|| {
                format!("{key}={label}: expected Context= or Qualifier1= to Qualifier6=")
            })?;
        if label.is_empty() {
            return Err(format!("{key}=: the label is empty"));
        }
        if let Some((_, other)) = &self.named[n - 1] {
            return Err(format!("Qualifier{n} is also set on line {other}"));
        }
        self.named[n - 1] = Some((label.to_owned(), line));
        Ok(())
    }

    /// The qualifier columns the header describes (`None`: no `QualifierN=` line), once
    /// [`check`](Self::check) has passed.
    pub(super) fn finish(&self) -> Option<[Col; 6]> {
        if self.named.iter().all(Option::is_none) {
            return None;
        }
        let mut cols = [Col::Unnamed; 6];
        for (i, named) in self.named.iter().enumerate() {
            if let Some((label, _)) = named {
                cols[i] = if self.custom {
                    Col::Q(i)
                } else {
                    geographic(label).unwrap_or(Col::Unnamed)
                };
            }
        }
        Some(cols)
    }

    /// Checks the labels once the context is known (the `Start` line).
    pub(super) fn check(&self) -> Result<(), (usize, String)> {
        let mut holder: [Option<usize>; 6] = [None; 6];
        let mut any = None;
        for (i, named) in self.named.iter().enumerate() {
            let Some((label, line)) = named else { continue };
            any = Some(*line);
            if self.custom {
                holder[i] = Some(i);
                continue;
            }
            match geographic(label) {
                None => {
                    return Err((
                        *line,
                        format!(
                            "Qualifier{}={label}: not a geographic qualifier (Continent, Country, \
                             Region or State, City, ISP, Organization; Subdivision_2_Name is read \
                             past); with Context=custom any label names column {}",
                            i + 1,
                            i + 1
                        ),
                    ));
                }
                Some(Col::Q(slot)) => {
                    if let Some(other) = holder[slot] {
                        return Err((
                            *line,
                            format!(
                                "Qualifier{}={label}: Qualifier{} names the same qualifier",
                                i + 1,
                                other + 1
                            ),
                        ));
                    }
                    holder[slot] = Some(i);
                }
                Some(_) => {}
            }
        }
        match any {
            Some(line) if holder.iter().all(Option::is_none) => {
                Err((line, "the header names no qualifier column".into()))
            }
            _ => Ok(()),
        }
    }
}

/// The qualifier a geographic label names (case, `_`, `-` and spaces ignored).
fn geographic(label: &str) -> Option<Col> {
    let norm: String = label
        .chars()
        .filter(|c| !matches!(c, '_' | '-' | ' '))
        .flat_map(char::to_lowercase)
        .collect();
    Some(match norm.as_str() {
        "continent" | "continentcode" | "continentname" => Col::Q(0),
        "country" | "countrycode" | "countryisocode" | "countryname" => Col::Q(1),
        "region"
        | "regioncode"
        | "regionname"
        | "state"
        | "province"
        | "subdivision"
        | "subdivision1"
        | "subdivision1name"
        | "subdivision1isocode" => Col::Q(2),
        "city" | "cityname" => Col::Q(3),
        "isp" | "ispname" => Col::Q(4),
        "organization" | "organisation" | "organizationname" | "org" | "orgname" => Col::Q(5),
        "subdivision2" | "subdivision2name" | "subdivision2isocode" => Col::Skip,
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
