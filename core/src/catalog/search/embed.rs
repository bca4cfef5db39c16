//! Meaning, not only words: static token embeddings (WordLlama `l2_supercat`, 256 dimensions;
//! docs/search.md says where they come from and under which licence), run in-process: a text is
//! cut into the model's BPE tokens, its vector is the mean of their rows, normalised, and two
//! texts are as close as their vectors' dot product. Loaded once from files `scripts/setup.sh`
//! puts in `models/wordllama/`, each checked by SHA-256.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};

pub const WEIGHTS_FILE: &str = "l2_supercat_256.safetensors";
pub const TOKENIZER_FILE: &str = "l2_supercat_tokenizer_config.json";
const WEIGHTS_SHA256: &str = "64b47a2dc493cb8e85944076601189739852d7b64e0e1eedcb1937a251cd9fd5";
const TOKENIZER_SHA256: &str = "93248f2a9ec36c7b35f700a033d5f36228aae48db61aee31007fa49062cdeb68";
/// Characters of a text that are embedded; the rest adds little to a mean.
const MAX_CHARS: usize = 600;

/// The loaded model: the BPE tokenizer and the token embedding table (f16 bits).
pub struct Embedder {
    dim: usize,
    vocab: HashMap<Box<str>, u32>,
    /// (left, right) → (rank, merged token).
    merges: HashMap<(u32, u32), (u32, u32)>,
    /// `<0xXX>` tokens for bytes of characters the vocabulary lacks.
    bytes: Vec<Option<u32>>,
    weights: Vec<u16>,
}

/// Why the model could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    #[error("{0}: sha256 {1}, expected {2}")]
    Hash(PathBuf, String, &'static str),
    #[error("{0}: {1}")]
    Format(PathBuf, String),
}

impl Embedder {
    /// Loads and checks the model in `dir`.
    pub fn load(dir: &Path) -> Result<Embedder, LoadError> {
        let read = |name: &str, sha: &'static str| {
            let path = dir.join(name);
            let bytes = std::fs::read(&path).map_err(|e| LoadError::Io(path.clone(), e))?;
            let got = hex::encode(Sha256::digest(&bytes));
            if got != sha {
                return Err(LoadError::Hash(path, got, sha));
            }
            Ok((path, bytes))
        };
        let (tpath, tokenizer) = read(TOKENIZER_FILE, TOKENIZER_SHA256)?;
        let (wpath, weights) = read(WEIGHTS_FILE, WEIGHTS_SHA256)?;
        let bad = |p: &PathBuf, m: &str| LoadError::Format(p.clone(), m.to_owned());

        let t: serde_json::Value =
            serde_json::from_slice(&tokenizer).map_err(|e| bad(&tpath, &e.to_string()))?;
        let model = &t["model"];
        let vocab: HashMap<Box<str>, u32> = model["vocab"]
            .as_object()
            .ok_or_else(|| bad(&tpath, "no model.vocab"))?
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().into(), v.as_u64()? as u32)))
            .collect();
        let mut merges = HashMap::new();
        for (rank, m) in model["merges"]
            .as_array()
            .ok_or_else(|| bad(&tpath, "no model.merges"))?
            .iter()
            .enumerate()
        {
            let Some((a, b)) = m.as_str().and_then(|m| m.split_once(' ')) else {
                return Err(bad(&tpath, "a merge is not two tokens"));
            };
            let merged = format!("{a}{b}");
            if let (Some(a), Some(b), Some(m)) =
                (vocab.get(a), vocab.get(b), vocab.get(merged.as_str()))
            {
                merges.insert((*a, *b), (rank as u32, *m));
            }
        }
        let bytes = (0..=255u8)
            .map(|b| vocab.get(format!("<0x{b:02X}>").as_str()).copied())
            .collect();

        if weights.len() < 8 {
            return Err(bad(&wpath, "too short"));
        }
        let header_len = u64::from_le_bytes(weights[..8].try_into().unwrap()) as usize;
        let header: serde_json::Value = weights
            .get(8..8 + header_len)
            .and_then(|h| serde_json::from_slice(h).ok())
            .ok_or_else(|| bad(&wpath, "unreadable header"))?;
        let e = &header["embedding.weight"];
        if e["dtype"] != "F16" {
            return Err(bad(&wpath, "embedding.weight is not F16"));
        }
        let shape: Vec<usize> = e["shape"]
            .as_array()
            .map(|s| {
                s.iter()
                    .filter_map(|x| x.as_u64().map(|x| x as usize))
                    .collect()
            })
            .unwrap_or_default();
        let [rows, dim] = shape[..] else {
            return Err(bad(&wpath, "embedding.weight is not a matrix"));
        };
        let start = 8 + header_len + e["data_offsets"][0].as_u64().unwrap_or(0) as usize;
        let end = 8 + header_len + e["data_offsets"][1].as_u64().unwrap_or(0) as usize;
        if end - start != rows * dim * 2 || end > weights.len() || rows < vocab.len() {
            return Err(bad(&wpath, "embedding.weight does not fit its shape"));
        }
        let weights = weights[start..end]
            .chunks_exact(2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        Ok(Embedder {
            dim,
            vocab,
            merges,
            bytes,
            weights,
        })
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// The model's token ids for `text` (as its tokenizer gives them, without `<s>`).
    pub fn tokens(&self, text: &str) -> Vec<u32> {
        let text: String = text.chars().take(MAX_CHARS).collect();
        if text.is_empty() {
            return Vec::new();
        }
        // The normaliser: "▁" before the text, and every space becomes "▁".
        let normalized = format!("▁{}", text.replace(' ', "▁"));
        let mut symbols: Vec<u32> = Vec::with_capacity(normalized.len());
        let mut buf = [0u8; 4];
        for c in normalized.chars() {
            let s = c.encode_utf8(&mut buf);
            match self.vocab.get(&*s) {
                Some(id) => symbols.push(*id),
                None => {
                    for b in s.bytes() {
                        if let Some(id) = self.bytes[b as usize] {
                            symbols.push(id);
                        }
                    }
                }
            }
        }
        bpe(&symbols, &self.merges)
    }

    /// The normalised mean of the tokens' rows, or `None` for a text with no token.
    pub fn embed(&self, text: &str) -> Option<Vec<f32>> {
        let ids = self.tokens(text);
        if ids.is_empty() {
            return None;
        }
        let mut v = vec![0f32; self.dim];
        for id in &ids {
            let row = &self.weights[*id as usize * self.dim..(*id as usize + 1) * self.dim];
            for (x, h) in v.iter_mut().zip(row) {
                *x += f16_to_f32(*h);
            }
        }
        let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
        if norm == 0.0 {
            return None;
        }
        v.iter_mut().for_each(|x| *x /= norm);
        Some(v)
    }
}

/// Every document's vector, to rank them by closeness to a query.
pub struct DenseIndex {
    model: Arc<Embedder>,
    /// One normalised vector per document (zeros for a document with no token), shared with
    /// the process-wide cache.
    vecs: Vec<Arc<[f32]>>,
}

impl DenseIndex {
    /// The vectors of `texts`; a text embedded before (an unchanged tool in a rebuilt snapshot)
    /// is taken from a process-wide cache.
    pub fn build(model: Arc<Embedder>, texts: impl Iterator<Item = String>) -> DenseIndex {
        /// Entries kept at most; past it the cache starts again.
        const CACHE_MAX: usize = 100_000;
        static CACHE: OnceLock<std::sync::Mutex<HashMap<String, Arc<[f32]>>>> = OnceLock::new();
        let cache = CACHE.get_or_init(Default::default);
        let dim = model.dim;
        let mut vecs = Vec::new();
        for t in texts {
            let cached = cache
                .lock()
                .expect("embedding cache poisoned")
                .get(&t)
                .cloned();
            let v = cached.unwrap_or_else(|| {
                let v: Arc<[f32]> = model.embed(&t).unwrap_or_else(|| vec![0.0; dim]).into();
                let mut c = cache.lock().expect("embedding cache poisoned");
                if c.len() >= CACHE_MAX {
                    c.clear();
                }
                c.insert(t, v.clone());
                v
            });
            vecs.push(v);
        }
        DenseIndex { model, vecs }
    }

    /// Each document's closeness to `query` (cosine, -1 to 1), or `None` when the query has no
    /// token.
    pub fn scores(&self, query: &str) -> Option<Vec<f32>> {
        let q = self.model.embed(query)?;
        Some(self.vecs.iter().map(|v| dot(v, &q)).collect())
    }
}

/// A dot product in eight independent lanes, so the compiler can use vector instructions.
fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f32 = ca
        .remainder()
        .iter()
        .zip(cb.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

/// Byte-pair merging: the pair of neighbours with the lowest merge rank is merged first (the
/// leftmost on a tie), until no neighbouring pair has a merge.
fn bpe(symbols: &[u32], merges: &HashMap<(u32, u32), (u32, u32)>) -> Vec<u32> {
    let n = symbols.len();
    let mut id = symbols.to_vec();
    let mut prev: Vec<isize> = (0..n as isize).map(|i| i - 1).collect();
    let mut next: Vec<usize> = (1..=n).collect();
    let mut alive = vec![true; n];
    // (rank, left position, left id, right id): stale entries are skipped when popped.
    let mut heap = BinaryHeap::new();
    for i in 0..n.saturating_sub(1) {
        if let Some((rank, _)) = merges.get(&(id[i], id[i + 1])) {
            heap.push(Reverse((*rank, i, id[i], id[i + 1])));
        }
    }
    while let Some(Reverse((_, i, a, b))) = heap.pop() {
        let j = next[i];
        if !alive[i] || j >= n || !alive[j] || id[i] != a || id[j] != b {
            continue;
        }
        let (_, merged) = merges[&(a, b)];
        id[i] = merged;
        alive[j] = false;
        next[i] = next[j];
        if next[i] < n {
            prev[next[i]] = i as isize;
        }
        if prev[i] >= 0 {
            let p = prev[i] as usize;
            if let Some((rank, _)) = merges.get(&(id[p], id[i])) {
                heap.push(Reverse((*rank, p, id[p], id[i])));
            }
        }
        if next[i] < n {
            let k = next[i];
            if let Some((rank, _)) = merges.get(&(id[i], id[k])) {
                heap.push(Reverse((*rank, i, id[i], id[k])));
            }
        }
    }
    (0..n).filter(|i| alive[*i]).map(|i| id[i]).collect()
}

/// IEEE 754 half precision to single.
fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let frac = (h & 0x3ff) as u32;
    let bits = match (exp, frac) {
        (0, 0) => sign,
        (0, _) => {
            // Subnormal: normalise it.
            let mut e = 127 - 15 + 1;
            let mut f = frac;
            while f & 0x400 == 0 {
                f <<= 1;
                e -= 1;
            }
            sign | ((e as u32) << 23) | ((f & 0x3ff) << 13)
        }
        (0x1f, 0) => sign | 0x7f80_0000,
        (0x1f, _) => sign | 0x7fc0_0000,
        _ => sign | ((exp + 127 - 15) << 23) | (frac << 13),
    };
    f32::from_bits(bits)
}

/// Where the model is looked for: `WB_SEARCH_MODEL_DIR`, else `models/wordllama` in the working
/// directory, else in the source tree this binary was built from. `WB_SEARCH_MODEL_DIR=off`
/// turns meaning-based search off (words only).
pub fn model_dir() -> Option<PathBuf> {
    match std::env::var("WB_SEARCH_MODEL_DIR") {
        Ok(d) if d == "off" => None,
        Ok(d) => Some(PathBuf::from(d)),
        Err(_) => {
            let here = PathBuf::from("models/wordllama");
            if here.join(WEIGHTS_FILE).exists() {
                return Some(here);
            }
            Some(Path::new(env!("CARGO_MANIFEST_DIR")).join("../models/wordllama"))
        }
    }
}

/// The process's model, loaded on first use; `None` (words only) when it is turned off or
/// cannot be loaded, which is logged once.
pub fn shared() -> Option<Arc<Embedder>> {
    static MODEL: OnceLock<Option<Arc<Embedder>>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            let dir = model_dir()?;
            match Embedder::load(&dir) {
                Ok(m) => {
                    tracing::info!(dir = %dir.display(), "search model loaded");
                    Some(Arc::new(m))
                }
                Err(e) => {
                    tracing::warn!(
                        error = %e,
                        "search model not loaded: tool search matches words only \
                         (scripts/setup.sh installs the model)"
                    );
                    None
                }
            }
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_floats_convert_exactly() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert_eq!(f16_to_f32(0), 0.0);
    }

    #[test]
    fn pairs_merge_by_rank_leftmost_first() {
        // a=0 b=1 ab=2 abb=3; "ab" ranks before "ab b".
        let merges = HashMap::from([((0, 1), (0, 2)), ((2, 1), (1, 3))]);
        assert_eq!(bpe(&[0, 1, 1, 0, 1], &merges), [3, 2]);
        assert_eq!(bpe(&[1, 0], &merges), [1, 0]);
        assert!(bpe(&[], &merges).is_empty());
    }
}

/// Against the installed model (`scripts/setup.sh`): fails when it is missing, so a test run
/// never measures words-only search by accident.
#[cfg(test)]
mod model_tests {
    use super::*;

    fn model() -> Embedder {
        let dir = model_dir().expect("WB_SEARCH_MODEL_DIR=off in a test run");
        Embedder::load(&dir).unwrap_or_else(|e| panic!("{e}: run scripts/setup.sh"))
    }

    #[test]
    fn tokens_match_the_reference_tokenizer() {
        // Token ids from the `tokenizers` Python package with this tokenizer file.
        let m = model();
        assert_eq!(
            m.tokens("send a message to a slack channel"),
            [3638, 263, 2643, 304, 263, 269, 2364, 8242]
        );
        assert_eq!(
            m.tokens("Create a Jira issue."),
            [6204, 263, 435, 3055, 2228, 29889]
        );
        assert_eq!(
            m.tokens("getUserByID ünïcode 日本 42"),
            [
                679, 2659, 2059, 1367, 2505, 29876, 30085, 401, 29871, 30325, 30346, 29871, 29946,
                29906
            ]
        );
        assert_eq!(m.tokens("  two  spaces"), [259, 1023, 29871, 8162]);
    }

    #[test]
    fn a_request_is_closer_to_the_tool_that_does_it() {
        let m = model();
        let v = |s: &str| m.embed(s).unwrap();
        let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
        let q = v("send a message to a slack channel");
        let slack = v("Post a message to a Slack channel.");
        let jira = v("Create a Jira issue");
        assert!(dot(&q, &slack) > 0.7, "{}", dot(&q, &slack));
        assert!(dot(&q, &jira) < 0.2, "{}", dot(&q, &jira));
        assert!((dot(&q, &q) - 1.0).abs() < 1e-5);
        assert!(m.embed("").is_none());
    }

    #[test]
    fn a_model_file_that_does_not_match_its_hash_is_refused() {
        let src = model_dir().unwrap();
        let dir = std::env::temp_dir().join(format!("wb-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::copy(src.join(TOKENIZER_FILE), dir.join(TOKENIZER_FILE)).unwrap();
        std::fs::write(dir.join(WEIGHTS_FILE), b"not the weights").unwrap();
        let err = Embedder::load(&dir).err().unwrap().to_string();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(err.contains("sha256"), "{err}");
    }
}
