//! From a hit's match statistics to the probability that the tool fits the request: a logistic
//! model over a few scale-free features, fitted on the tuning queries (`core/tests/search_eval.rs`
//! refits it: `cargo test -p workbench-core --test search_eval fit_calibration -- --ignored
//! --nocapture`) and checked on queries held out from the fit.

/// What a hit's score is computed from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Features {
    /// The hit's BM25F score over the most the query's words could score (words the index has
    /// never seen count at full weight): how much of the request the tool explains.
    pub explained: f32,
    /// The share of the query's known words (those some tool has) that this tool matches,
    /// each weighed by its rarity.
    pub known_covered: f32,
    /// The share of the query, weighed by rarity, that no tool has a word for.
    pub unknown: f32,
    /// The hit's score over the best hit's.
    pub relative: f32,
    /// How many distinct words the query has.
    pub words: f32,
    /// The hit's place in the ranking, 0 for the best.
    pub rank: f32,
    /// The query is the tool's exact name.
    pub exact_name: bool,
}

/// How many inputs the logistic model has.
pub const N: usize = 6;

/// The logistic model's weights, in `Features::vector` order, then the intercept. The features
/// are lexical: the meaning model changes which tools rank first, but a weight for its cosine,
/// fitted too, separated no-fit requests worse on the tuning set (AUC 0.65 against 0.69), so the
/// score does not use it.
pub const WEIGHTS: [f32; N + 1] = [1.409, 1.423, -0.637, 1.967, 1.190, 2.891, -8.145];

/// A search whose best hit scores under this answers `no_match` (the tuning set's best balanced
/// accuracy).
pub const NO_MATCH_BELOW: f32 = 0.46;

impl Features {
    /// The inputs of the logistic model (the intercept's input, 1, excluded).
    pub fn vector(&self) -> [f32; N] {
        [
            self.explained,
            self.known_covered,
            self.unknown,
            self.relative,
            (1.0 + self.words).ln(),
            1.0 / (1.0 + self.rank),
        ]
    }

    /// The estimated probability that the tool fits the request.
    pub fn probability(&self) -> f32 {
        if self.exact_name {
            return 1.0;
        }
        probability_with(&WEIGHTS, &self.vector())
    }
}

/// The logistic model with the given weights (the last is the intercept).
pub fn probability_with(weights: &[f32; N + 1], x: &[f32; N]) -> f32 {
    let z = weights[N] + x.iter().zip(weights).map(|(x, w)| x * w).sum::<f32>();
    1.0 / (1.0 + (-z).exp())
}
