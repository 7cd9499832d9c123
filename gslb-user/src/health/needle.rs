//! `body_contains`: finding a needle in a body that arrives in frames.
//!
//! A body may come in any number of frames (HTTP chunks, TLS records, reads), down to one
//! byte each, so a search that looked at the whole body read so far on every frame would cost
//! the square of the body's length. The search here is Knuth–Morris–Pratt's: its only state
//! across frames is how much of the needle the last bytes matched, and each byte of the body
//! is looked at once (at most two steps per byte, whatever the needle and the frames). No body
//! is kept.

/// A `body_contains` needle, ready to search bodies with.
#[derive(Clone, Debug)]
pub(super) struct Needle {
    bytes: Vec<u8>,
    /// For a match of `i + 1` bytes that the next byte breaks, the length of the longest
    /// proper prefix of the needle that ends the match too (where the search resumes).
    fallback: Vec<usize>,
}

impl Needle {
    pub(super) fn new(bytes: &[u8]) -> Self {
        let mut fallback = vec![0; bytes.len()];
        let mut k = 0;
        for i in 1..bytes.len() {
            while k > 0 && bytes[i] != bytes[k] {
                k = fallback[k - 1];
            }
            if bytes[i] == bytes[k] {
                k += 1;
            }
            fallback[i] = k;
        }
        Needle {
            bytes: bytes.to_vec(),
            fallback,
        }
    }

    pub(super) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// A search of one body, fed its frames in order.
    pub(super) fn search(&self) -> Search<'_> {
        Search {
            needle: self,
            matched: 0,
            #[cfg(test)]
            steps: 0,
        }
    }
}

/// One body's search.
pub(super) struct Search<'a> {
    needle: &'a Needle,
    /// How many bytes of the needle the body's last bytes match.
    matched: usize,
    /// Steps taken (bytes looked at, and fallbacks), for the tests.
    #[cfg(test)]
    steps: u64,
}

impl Search<'_> {
    /// Takes the next frame; true once the needle has been seen (an empty needle at once).
    pub(super) fn feed(&mut self, frame: &[u8]) -> bool {
        let needle = &self.needle.bytes;
        if self.matched == needle.len() {
            return true;
        }
        for &b in frame {
            #[cfg(test)]
            {
                self.steps += 1;
            }
            while self.matched > 0 && needle[self.matched] != b {
                self.matched = self.needle.fallback[self.matched - 1];
                #[cfg(test)]
                {
                    self.steps += 1;
                }
            }
            if needle[self.matched] == b {
                self.matched += 1;
                if self.matched == needle.len() {
                    return true;
                }
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether `needle` is found in `body` cut into frames at `cuts`.
    fn found(needle: &str, body: &str, cuts: &[usize]) -> bool {
        let needle = Needle::new(needle.as_bytes());
        let mut search = needle.search();
        let mut at = 0;
        for &cut in cuts.iter().chain([&body.len()]) {
            if search.feed(&body.as_bytes()[at..cut]) {
                return true;
            }
            at = cut;
        }
        false
    }

    #[test]
    fn a_needle_is_found_across_frame_boundaries() {
        let body = "build 7, status: ok, 3 workers";
        let at = body.find("status: ok").unwrap();
        // (needle, frame cuts, found)
        let table: &[(&str, &[usize], bool)] = &[
            ("status: ok", &[], true),
            // Split over two frames, and over three.
            ("status: ok", &[at + 3], true),
            ("status: ok", &[at + 1, at + 7], true),
            // One byte per frame.
            ("status: ok", &(1..body.len()).collect::<Vec<_>>(), true),
            ("status: ko", &[at + 3], false),
            ("3 workers", &[body.len() - 1], true),
            ("b", &[], true),
            ("", &[], true),
            ("workers!", &[body.len() - 3], false),
        ];
        for (needle, cuts, want) in table {
            assert_eq!(
                found(needle, body, cuts),
                *want,
                "{needle:?} cut at {cuts:?}"
            );
        }
        let overlapping = "xaaaabx";
        for cut in 0..=overlapping.len() {
            assert!(found("aaab", overlapping, &[cut]), "cut at {cut}");
            assert!(!found("aaaab ", overlapping, &[cut]), "cut at {cut}");
        }
        assert!(found("abab", "ababab", &[1, 3]));
        assert!(found("aab", "aaab", &[1, 2, 3]));
    }

    /// A body that arrives one byte at a time, the worst case for a search that looks at the
    /// whole body again on every frame, costs at most two steps per byte (each byte either
    /// extends the match or shortens it, and it cannot shorten more than it grew), whatever
    /// the needle.
    #[test]
    fn many_small_frames_are_searched_in_linear_time() {
        let body = vec![b'a'; 64 * 1024];
        for needle in [&b"aaaaaaaaaaaaaaab"[..], b"status: ok", b"ab"] {
            for frame in [1, 7, 1500] {
                let needle = Needle::new(needle);
                let mut search = needle.search();
                for chunk in body.chunks(frame) {
                    assert!(!search.feed(chunk));
                }
                assert!(
                    search.steps <= 2 * body.len() as u64,
                    "{} steps for {} bytes in frames of {frame}, needle {:?}",
                    search.steps,
                    body.len(),
                    String::from_utf8_lossy(needle.bytes())
                );
            }
        }
    }
}
