//! A fake OpenID Connect provider on loopback for the single sign-on tests (sso.rs): discovery,
//! an authorization endpoint that at once signs in whoever the test says, a token endpoint
//! that checks the client secret (HTTP Basic) and PKCE S256 and issues RS256 ID tokens, a JWKS
//! that key rotation changes, and switches that spoil the next ID token in one way each. With
//! `offline_access` among the scopes asked for it also issues refresh tokens, and answers the
//! refresh grant (the background re-check) the way a real provider does: the token rotates, a
//! disabled person or an unknown token is refused (`invalid_grant`), and the ID token carries
//! the person's claims as the test set them last. It records what it receives so tests can
//! assert on it.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use axum::extract::{Form, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use base64::Engine as _;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use workbench_core::clock::{Clock, ManualClock};

/// The last token request: its Basic client id, and its form.
type TokenRequest = (Option<String>, HashMap<String, String>);

/// The client workbench is registered as at this provider.
pub const CLIENT_ID: &str = "workbench-test";
/// Its client secret (tests keep it in the project's vault).
pub const CLIENT_SECRET: &str = "oidc-test-secret-7c41e9d2b8";

/// An RSA signing key with its public half as a JWK (base64url modulus and exponent).
struct TestKey {
    kid: &'static str,
    /// PKCS#1 PEM of the private key.
    pem: &'static str,
    n: &'static str,
    e: &'static str,
}

// TEST-ONLY KEYS. These RSA keys were generated for this fake provider (`openssl genrsa
// -traditional 2048`) and sign nothing but ID tokens in these tests; they protect nothing.
// `n` and `e` are the public modulus and exponent of each, base64url without padding.

/// The key the provider starts with.
const KEY_A: TestKey = TestKey {
    kid: "test-key-a",
    pem: "-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAu56OHou+qcAkvIny35tEGQdLjdkQuevvdJvn3+WSkdqmYly6
yN2hwhX62/zpSpsquGtkYymyVyf1iuarzUVH7nmEAuoKuHBi7tcfOKryAovhG/F1
icApq7ZWlq5yhZeMrYQ2bWePc4J3Z507mnS2oSPYuZwCoy2g/PnXE6XDxaqXh67Y
zzTeKsBvPTmzrj9TtkZeXq2CvHpHFl3FhekzbCRPvr8sHyjaj0ZfQKaEQJrr84BE
e595pkB6/WFwo/gvvvvCfSXFp37GdceEyNeJfwRqeET4V3dLr/RaviQjT+G9QDYV
YaxSShQnBoOXt6res/exYi1rNOcuRf2f1asRrQIDAQABAoIBAB1qT3fkiwEMOfZB
Xo3GRxfxd9wGc0PjBMjwhJsq4B7z+/Ah/7rsXKcUUR9aeK0UxM7jL3sIl4hooGul
nLvzJ8Lw1Eysqv+dxzURDzkQPB9AFQwPgFEXirD8RnkbYqMlTo4J04q1mN0QUG4z
TZv6voNnHlyDZDp3Ne1Tsm/HJnl/75QtTTvYFdheFJ24DI9TnDhAwVIw7zgwKCt8
koY5+vCfuKIi6m+eXspeEpTZIMJsLUdiCFOkvBpMu2vQK6Hbkxx4V2mchYe8OtOQ
KvVlrljpCKFbPKCaKrUmH7LoSo5wxiDjQOVTGyi716tJywb/e0BaDlkZas5X4/8X
1YVsa7UCgYEA7IZ5BPhaodp3wh8T5VzjpEOAf7EgldohBqZlZp80MvUPa0C+kqqf
En6OzimAA7xxoGEve8wNLOiM8OPEg8Y+1gI4qDOAswC/gMj4Ozk6aPucpzpuRRKf
Ec/AO6Ubl0RE6rCufk3lg/5Sp29moX++ZXQNHEqb1RlAOWngrIgoXNsCgYEAyxE7
xZv4g87UBn4HQN3sZuy08DglODLdMRlF4Wj/xGFjpFcL+KQ65BN8a5IWZFLoADcR
1NPSMBAsbueE+JNMWVAMIYoAYdlnrrielzs8drqVC1w884DenxjQd0VISuZU7dNw
IDGzAuuI4cBisMk241dageD8cs9FVOgtFHVAThcCgYAZpVMF6O/a0NdfYwNDQVkl
fHQ4ZDpGRUqDcBNalzSPueacGH8RZBKvbK2LSRCqVwpy+1ass6lSDz0I+YlbSGmT
xtXh1wPDZPdevWu88C2XKIEJ2NoP/z7kLYSIcxSUyEA4ukORSlzyfOb1ZKzaIgHA
+l5ZjPVsm7pM/1/vFSxbNQKBgC59d426M58ZjvkdiVOUezblIleMwximrHU9L/53
J3cyRLmvJBJ8pu7odye5fl7hjDPgZ7it9gUC7ulFH/A46NXZua1EBupf95jMs6Iz
8ZfNB6peJ6Yn7s/FwpRLzE05hmAcdCMqva0Bd4kXnoCS0Hoj2Zi6hZFTWrAhp5Bz
d5FpAoGBAJn4JT0OUm9qmCvNKYB12H3v08UK9pToEhx+EGURJbyjpiOMxrZyAMYP
fJ2QDL/mRCioVJ40qmnOfOF0ZPr1ZmQUIP636abaDfD0cwXAvjqEMhrTzc5IpDSK
nswZkHSCJWTXtpzjXPIln/ROwpNVUbpOpUhCIH72bST8+tdifwDI
-----END RSA PRIVATE KEY-----",
    n: "u56OHou-qcAkvIny35tEGQdLjdkQuevvdJvn3-WSkdqmYly6yN2hwhX62_zpSpsquGtkYymyVyf1iuarzUVH7nmEAuoKuHBi7tcfOKryAovhG_F1icApq7ZWlq5yhZeMrYQ2bWePc4J3Z507mnS2oSPYuZwCoy2g_PnXE6XDxaqXh67YzzTeKsBvPTmzrj9TtkZeXq2CvHpHFl3FhekzbCRPvr8sHyjaj0ZfQKaEQJrr84BEe595pkB6_WFwo_gvvvvCfSXFp37GdceEyNeJfwRqeET4V3dLr_RaviQjT-G9QDYVYaxSShQnBoOXt6res_exYi1rNOcuRf2f1asRrQ",
    e: "AQAB",
};

/// The key `rotate_key` switches to.
const KEY_B: TestKey = TestKey {
    kid: "test-key-b",
    pem: "-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAxbgSvBZTN7AV6bUd9wHHtfmQa+YRp9Ly6nqnisYHsIOG4CW8
KMAURlAO7541XH2Ke2Eeb7/R6vjrBj8g2e9/g3S1hFadhooVNkR/3SmqkuPSOSmr
epzxNb/9SpAKCZRqN7KL62elxxBQhdHO0T3SvGPOG9lERFuvOguDuz8te4cbriD6
Mvx9uu/26S0vHX8bZnA/sJOufFxcQNDipkZ8KfQN2yZgP9VYZbL7WJSiNX6LMWhE
sU3OnG6WY2Z7sk+voqHdoX6kKdMlUpUysMPpBLn/Xw049XNH0mbtnWZCvZxW/4EP
TDvBXM/H9qnIVbmQXqAdfcxzTRsdYObmqvNOUwIDAQABAoIBAAa7MWQW4dFmXMXz
770ON0rc4Auprasy1X33HAdvnikRE+vt953ENaHT2ED/IrOZ5eI1GGYB4qHRxJ/r
UUZ/eViz207R62ipAHeJqyK6kunk+K4P2vHV2v5ooV/C+fHWjCvbl8OKvUxCzsL8
4Bd5N9iduzwb0E+qzBM5UMxJ+9XrNcu1Z2M398TUELwijNLKqHrMV0Ny+xrCnWvp
dp0xyr61DFjTkY9IuZCtrxDzMV4mQmxYTI8Yjaqf+jdCcNjz1sN4VOt+KTm8zAnQ
HtNIU8Z07ANzPbaaJYK9vDN6UZnw9egPeemS02PJnWK01fGcxVKQ0Lh7lOv+ev5F
/xjHEQkCgYEA40Tw3Z93chzVhzj/1NgCRoMWRpBYy9Wexq0I+V8sNH1JQYakxG5z
lFCw/SxKos/b4aG8Wh5tpuVzWxP66/aQaNMfCLqkiAmrR0MlxtNw/MABj61LcSLR
4JNLdImTYUnepBUrr+h/dIoD9h0ei88jPgA9iybbfLuS4clCIUAGpVsCgYEA3rbN
9hFKEkbTXirqED7HDiDaQzHBxeaf4m385e6melTb3JR2oECRnCUoRKoM9W7RqI4K
KmY6xKf476HhO3hujXkVSdcQ8uONYQpZc8YDulMivqE5fbhLhygX3YaAlc9QaLwW
nSue0QvSDZdt51HIc1/rDt9x67KqGeM4ElZZNGkCgYEAp4P/TjvmXPQn55355Da7
pqGk36ox6Tyx5ZtRTA38lUvrnSLTe/41rxKzAkmNUeiIGA2QuZRIGoZxuqZFg3ug
AcPr0hFQiP0nhEVYKO9dDs+v1ulS/DdAH5oyOdnWChXax3LbWrOyjoHUXaolA8RQ
I7klo9WmXpAbudUQq1V4EJUCgYArx723GHD6JMgaI899QAn7QgQF33sa/xoA9eQY
AxDgzVunAdxL5kV5b2h6Dv+bI5y9SKbA7PWygN6TpLvU5/i7gMjpigh/5rF9GP66
nntPHlafKKxXhWn7eKswVedjC6zf2dGMNe3zZCJ3n4PwTAhefcWEV/JaBfYgPqVg
HW9NuQKBgGEKcE8FAr2r+hNKnLULltNOQ0Ww+GTI16mZBDhqXZQQsZE30HcjUu7p
XogDG0yC4OU4j0lvqv3dHAFXhgdD7OL8E/Newi+A3sQi+30jcq7cvlEnRlUJVxDI
ECXsOyD/iwS2fq12g2L91D8n9C56uLXyoOcc+ZHHl2NqYmuQEoQC
-----END RSA PRIVATE KEY-----",
    n: "xbgSvBZTN7AV6bUd9wHHtfmQa-YRp9Ly6nqnisYHsIOG4CW8KMAURlAO7541XH2Ke2Eeb7_R6vjrBj8g2e9_g3S1hFadhooVNkR_3SmqkuPSOSmrepzxNb_9SpAKCZRqN7KL62elxxBQhdHO0T3SvGPOG9lERFuvOguDuz8te4cbriD6Mvx9uu_26S0vHX8bZnA_sJOufFxcQNDipkZ8KfQN2yZgP9VYZbL7WJSiNX6LMWhEsU3OnG6WY2Z7sk-voqHdoX6kKdMlUpUysMPpBLn_Xw049XNH0mbtnWZCvZxW_4EPTDvBXM_H9qnIVbmQXqAdfcxzTRsdYObmqvNOUw",
    e: "AQAB",
};

/// A key the provider never publishes: tokens signed with it must be refused.
const ROGUE_KEY: TestKey = TestKey {
    kid: "test-key-rogue",
    pem: "-----BEGIN RSA PRIVATE KEY-----
MIIEowIBAAKCAQEAkL73D7CwbPcK1+za8+xcWl2sV3tY/Hl2RsogeQvx7HbI8ynj
HmCxtd7GaEHOg5gbs8kj1sIEI3RCjhuvRAklUL4rqP1f/etzjhcl6eTABdPD0fJf
KKv+vaNo+Bfv56Va+quBWNxKIefK4mpZVZs96LLaxZVrveIrfXxafPrEyoDDulgG
7gse/YNgqkwIIusUmbRRfhY+02rWZpIGJ5dugpbQCaR7oD6jSBJjwBwQdipUBuex
XVvi0O2t40zGDrr2640jgodfRKaZWfV4sd1ctgDW2FmEhq0rZp1svS1rXT/vJjRM
kcyO/dVNNCyNyfmErCiKDS3tUhjnE6/mrfqABwIDAQABAoIBABzo30yVdC9XSiWl
S3fzieCMnAre+n92vP5XiZPTpG6frPQQNioPkv7pr0QMfLRA0aufbVaL6qqwIkji
06cpknfle6/lZ2I+QBatnedwxj+Ds7U/jO0BKUB0HleK5GImXxz42z1FxlKuSpHd
Ptl/x6Yt7s8O0HWc8iW+jA4xQdPWBhk1leCG97E3NzRCDBeDSDWblGgkA6GKdjlo
MoZgK6e6XsLhEec8PRn6njTluaOQRcaMgJlAy3ubuTp6oWNxENt1wklHZsbNaNxw
kYyg21+bY0IIdcR7oCOn0mEm4Rfgys3DL/u8mg9QGqsVzhEZ3D2xKclQzK1fCh5L
NetLyw0CgYEAxCQ/jy0hYXpi1pKNZp1f8VOoOE2UCK141pKbb1dI+OAJdeAopL7r
EyK/xOAgrjn4BLue3C/IdMneEcPJ/XO9bt/RASVu4rAJ5s1GdIHbI4uZC3ZsAdcQ
TfDW2MFL9Nym8O1bgbe6jSJ/RoNBJCfJqlw1xAYvIcsfQLJU74ps2UsCgYEAvOti
CEDNurs/5tXwH+HtNJCTauWnOpY0V/AUM2QSEJoh0IopGt3Noqmiw6cekTd+oHs+
heBiRtsA2NX8kl7hetqLjFYKnAF05PjeRJPIr0PpzoDnIPoeqDf254PjsAu0J7Pp
4YfKIwc64WaU2PKjh5eXBOpXdbb0pzR5ThAR2rUCgYAXPUg+mZVL7GlLjR+t2dWl
TUkwKpjwkkUv/zzla00dF8ZnLgECzBAkO0jHddrJadrmDKjc49h3Zfem2TDUk+MN
AP3NifbiawMxUn8XjM8/HeorPoO7kBTBd1itY/Gw+HfbMfRWoUM8N6sm2qRcOU6e
ncBNEoKBGYUBcF+55gfRkwKBgETPu7pj2Euerqzm2frS8PKHgpqaIapOUayCLul1
FrtjWNO7rzMw/Ri1jyqSsaiVPRM5MNHUpBdI5+sTLlcmJhz4g4HPSTf/s9M+7r6t
0Zg9NWlZPFafpBEDqXQ0bveNm8YmWxchvbe6h3DYS3kmD/hwd7p7nPWseTp5+4E6
izZNAoGBALdEW/aKqcdRUiCuvy3jUwLvo2OmQ3qQd2z8dYSbnHC420hgXgze9uhm
ljfE8Fwkp1MxjqUYYkRvEjOjPNMRl0LVZyllhU8FDfUyqbIa8+tUBCJITzKpA4Vs
XKpfkzr9o32HgE8iqXnkuGE+ybrVPX6TCIY6YWsFiXzaghbakzMi
-----END RSA PRIVATE KEY-----",
    n: "kL73D7CwbPcK1-za8-xcWl2sV3tY_Hl2RsogeQvx7HbI8ynjHmCxtd7GaEHOg5gbs8kj1sIEI3RCjhuvRAklUL4rqP1f_etzjhcl6eTABdPD0fJfKKv-vaNo-Bfv56Va-quBWNxKIefK4mpZVZs96LLaxZVrveIrfXxafPrEyoDDulgG7gse_YNgqkwIIusUmbRRfhY-02rWZpIGJ5dugpbQCaR7oD6jSBJjwBwQdipUBuexXVvi0O2t40zGDrr2640jgodfRKaZWfV4sd1ctgDW2FmEhq0rZp1svS1rXT_vJjRMkcyO_dVNNCyNyfmErCiKDS3tUhjnE6_mrfqABw",
    e: "AQAB",
};

/// The keys the provider signs with, in rotation order (the JWKS lists only the current one).
static KEYS: [TestKey; 2] = [KEY_A, KEY_B];

/// One way to spoil the next ID token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tamper {
    /// `aud` names another client.
    WrongAudience,
    /// `iss` names another issuer.
    WrongIssuer,
    /// `nonce` is not the one of the authorization request.
    WrongNonce,
    /// `exp` passed an hour ago.
    Expired,
    /// Signed by a key the JWKS does not list, named by its own key id.
    UnknownKey,
    /// Signed by a key the JWKS does not list, claiming the current key's id.
    ForgedKid,
    /// HS256, keyed with the client secret (a MAC anyone holding the secret can make).
    Hs256,
    /// `alg: none`, no signature.
    AlgNone,
}

/// The person the provider signs in next.
#[derive(Debug, Clone)]
pub struct Person {
    pub sub: String,
    pub email: String,
    pub email_verified: bool,
    /// The `groups` claim as sent: an array, a single string, anything; None leaves it out.
    pub groups: Option<Value>,
}

impl Person {
    /// A person with a verified email in `groups`.
    pub fn new(sub: &str, email: &str, groups: &[&str]) -> Person {
        Person {
            sub: sub.to_owned(),
            email: email.to_owned(),
            email_verified: true,
            groups: Some(json!(groups)),
        }
    }

    /// The same person in `groups` instead.
    pub fn in_groups(mut self, groups: &[&str]) -> Person {
        self.groups = Some(json!(groups));
        self
    }

    /// The same person with the groups claim sent as `groups` (None: left out).
    pub fn with_groups_claim(mut self, groups: Option<Value>) -> Person {
        self.groups = groups;
        self
    }

    /// The same person with `email_verified` set to `verified`.
    pub fn verified(mut self, verified: bool) -> Person {
        self.email_verified = verified;
        self
    }
}

/// What the provider keeps with a refresh token: whom it was issued to, for whom, and what
/// was authorized.
#[derive(Clone)]
struct RefreshGrant {
    client_id: String,
    sub: String,
    scope: String,
}

/// What the authorization endpoint kept with a code, for the token endpoint.
struct Grant {
    client_id: String,
    redirect_uri: String,
    nonce: Option<String>,
    challenge: String,
    scope: String,
    person: Person,
}

struct IdpState {
    issuer: String,
    /// Times on ID tokens come from workbench's test clock, so moving it does not age them.
    clock: ManualClock,
    person: Mutex<Option<Person>>,
    /// Everyone `set_person` named, by subject, as they are now: a refreshed ID token carries
    /// these claims.
    people: Mutex<HashMap<String, Person>>,
    /// Subjects disabled at the provider: their refresh tokens are refused.
    disabled: Mutex<HashSet<String>>,
    codes: Mutex<HashMap<String, Grant>>,
    /// The refresh tokens that still work.
    refresh_tokens: Mutex<HashMap<String, RefreshGrant>>,
    /// The last refresh token handed out (code exchange or refresh).
    last_refresh_token: Mutex<Option<String>>,
    /// Issue refresh tokens even when offline_access was not asked for (some providers do).
    refresh_tokens_unasked: AtomicBool,
    /// The token endpoint answers refresh requests 503 (an outage).
    refresh_unavailable: AtomicBool,
    /// A refresh answers without an ID token (the provider only says the grant still holds).
    refresh_without_id_token: AtomicBool,
    /// Index into KEYS of the current signing key.
    current_key: Mutex<usize>,
    tamper: Mutex<Option<Tamper>>,
    /// The issuer the discovery document names (None: the real one).
    discovery_issuer: Mutex<Option<String>>,
    /// The Authorization header and form of the last token request.
    last_token_request: Mutex<Option<TokenRequest>>,
    discovery_requests: AtomicUsize,
    token_requests: AtomicUsize,
    id_tokens_issued: AtomicUsize,
    jwks_requests: AtomicUsize,
    /// Token requests with grant_type=refresh_token, whatever they were answered.
    refresh_requests: AtomicUsize,
    refresh_tokens_issued: AtomicUsize,
}

/// The running provider and its test controls.
pub struct FakeIdp {
    state: Arc<IdpState>,
}

impl FakeIdp {
    /// The issuer: the provider's base URL, without a trailing slash.
    pub fn issuer(&self) -> String {
        self.state.issuer.clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.state.issuer)
    }

    /// The person the next authorization request signs in. It is also who that subject is at
    /// the provider from now on: the next refresh of their grant carries these claims (groups).
    pub fn set_person(&self, person: Person) {
        self.state
            .people
            .lock()
            .unwrap()
            .insert(person.sub.clone(), person.clone());
        *self.state.person.lock().unwrap() = Some(person);
    }

    /// Disables the person `sub` at the provider: their refresh tokens are refused with
    /// `invalid_grant` from now on (and forgotten, as a real provider revokes them).
    pub fn disable(&self, sub: &str) {
        self.state.disabled.lock().unwrap().insert(sub.to_owned());
    }

    /// Makes the token endpoint answer every refresh request 503 (true) or normally (false).
    /// A refresh refused so leaves its token working.
    pub fn set_refresh_unavailable(&self, unavailable: bool) {
        self.state
            .refresh_unavailable
            .store(unavailable, Ordering::SeqCst);
    }

    /// Makes refreshes answer without an ID token (true): a new refresh token and an access
    /// token only, as providers do that send ID tokens at sign-in alone.
    pub fn set_refresh_without_id_token(&self, without: bool) {
        self.state
            .refresh_without_id_token
            .store(without, Ordering::SeqCst);
    }

    /// Makes the code exchange hand out a refresh token even when offline_access was not
    /// asked for (true), as some providers do.
    pub fn set_refresh_tokens_unasked(&self, unasked: bool) {
        self.state
            .refresh_tokens_unasked
            .store(unasked, Ordering::SeqCst);
    }

    /// The last refresh token the provider handed out (at a code exchange or a refresh).
    pub fn last_refresh_token(&self) -> Option<String> {
        self.state.last_refresh_token.lock().unwrap().clone()
    }

    /// Refresh tokens handed out so far.
    pub fn refresh_tokens_issued(&self) -> usize {
        self.state.refresh_tokens_issued.load(Ordering::SeqCst)
    }

    /// Token requests with grant_type=refresh_token so far, however they were answered.
    pub fn refresh_requests(&self) -> usize {
        self.state.refresh_requests.load(Ordering::SeqCst)
    }

    /// Whether `token` is a refresh token the provider still accepts.
    pub fn refresh_token_works(&self, token: &str) -> bool {
        self.state
            .refresh_tokens
            .lock()
            .unwrap()
            .contains_key(token)
    }

    /// Switches to the other signing key (a new kid); the JWKS then lists only the new key.
    pub fn rotate_key(&self) {
        let mut k = self.state.current_key.lock().unwrap();
        *k = (*k + 1) % KEYS.len();
    }

    /// The kid of the current signing key.
    pub fn current_kid(&self) -> &'static str {
        KEYS[*self.state.current_key.lock().unwrap()].kid
    }

    /// Spoils the next ID token the token endpoint issues (once).
    pub fn tamper_next(&self, how: Tamper) {
        *self.state.tamper.lock().unwrap() = Some(how);
    }

    /// Makes the discovery document name `issuer` instead of the provider's own.
    pub fn set_discovery_issuer(&self, issuer: &str) {
        *self.state.discovery_issuer.lock().unwrap() = Some(issuer.to_owned());
    }

    /// The Authorization header and form of the last token request.
    pub fn last_token_request(&self) -> (Option<String>, HashMap<String, String>) {
        self.state
            .last_token_request
            .lock()
            .unwrap()
            .clone()
            .expect("a token request")
    }

    pub fn discovery_requests(&self) -> usize {
        self.state.discovery_requests.load(Ordering::SeqCst)
    }

    pub fn token_requests(&self) -> usize {
        self.state.token_requests.load(Ordering::SeqCst)
    }

    /// ID tokens the token endpoint handed out (tampered ones included).
    pub fn id_tokens_issued(&self) -> usize {
        self.state.id_tokens_issued.load(Ordering::SeqCst)
    }

    pub fn jwks_requests(&self) -> usize {
        self.state.jwks_requests.load(Ordering::SeqCst)
    }
}

fn b64url(bytes: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn oauth_error(status: StatusCode, code: &str) -> Response {
    (status, Json(json!({ "error": code }))).into_response()
}

async fn discovery(State(s): State<Arc<IdpState>>) -> Json<Value> {
    s.discovery_requests.fetch_add(1, Ordering::SeqCst);
    let issuer = s
        .discovery_issuer
        .lock()
        .unwrap()
        .clone()
        .unwrap_or_else(|| s.issuer.clone());
    Json(json!({
        "issuer": issuer,
        "authorization_endpoint": format!("{}/authorize", s.issuer),
        "token_endpoint": format!("{}/token", s.issuer),
        "jwks_uri": format!("{}/jwks", s.issuer),
        "response_types_supported": ["code"],
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["RS256"],
        "scopes_supported": ["openid", "email", "profile", "groups", "offline_access"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "token_endpoint_auth_methods_supported": ["client_secret_basic"],
        "code_challenge_methods_supported": ["S256"],
        "claims_supported": ["iss", "sub", "aud", "exp", "iat", "nonce", "email", "email_verified", "groups"],
    }))
}

/// Signs in the current person at once: 302 back to the client with a fresh code.
async fn authorize(
    State(s): State<Arc<IdpState>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let get = |k: &str| q.get(k).map(String::as_str);
    if get("response_type") != Some("code") {
        return (StatusCode::BAD_REQUEST, "response_type must be code").into_response();
    }
    if get("code_challenge_method") != Some("S256") {
        return (
            StatusCode::BAD_REQUEST,
            "code_challenge_method must be S256",
        )
            .into_response();
    }
    if get("client_id") != Some(CLIENT_ID) {
        return (StatusCode::BAD_REQUEST, "unknown client").into_response();
    }
    let (Some(redirect_uri), Some(state), Some(challenge)) = (
        get("redirect_uri"),
        get("state"),
        get("code_challenge").filter(|c| !c.is_empty()),
    ) else {
        return (
            StatusCode::BAD_REQUEST,
            "missing redirect_uri, state or code_challenge",
        )
            .into_response();
    };
    let Ok(mut target) = url::Url::parse(redirect_uri) else {
        return (StatusCode::BAD_REQUEST, "redirect_uri is not a URL").into_response();
    };
    let Some(person) = s.person.lock().unwrap().clone() else {
        return (StatusCode::BAD_REQUEST, "the test set no person to sign in").into_response();
    };
    let code = workbench_core::crypto::random_base62(32);
    s.codes.lock().unwrap().insert(
        code.clone(),
        Grant {
            client_id: CLIENT_ID.to_owned(),
            redirect_uri: redirect_uri.to_owned(),
            nonce: q.get("nonce").cloned(),
            challenge: challenge.to_owned(),
            scope: q.get("scope").cloned().unwrap_or_default(),
            person,
        },
    );
    target
        .query_pairs_mut()
        .append_pair("code", &code)
        .append_pair("state", state);
    (StatusCode::FOUND, [(header::LOCATION, target.to_string())]).into_response()
}

/// Decodes one form-encoded half of HTTP Basic client credentials (RFC 6749 2.3.1).
fn form_decoded(s: &str) -> String {
    url::form_urlencoded::parse(s.as_bytes())
        .next()
        .map(|(k, v)| {
            if v.is_empty() {
                k.into_owned()
            } else {
                format!("{k}={v}")
            }
        })
        .unwrap_or_default()
}

/// The client id HTTP Basic authenticates (None: missing or a wrong secret).
fn basic_client(headers: &HeaderMap) -> Option<String> {
    let encoded = headers
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?
        .strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let pair = String::from_utf8(decoded).ok()?;
    let (id, secret) = pair.split_once(':')?;
    let (id, secret) = (form_decoded(id), form_decoded(secret));
    (id == CLIENT_ID && secret == CLIENT_SECRET).then_some(id)
}

/// The token endpoint: the client secret checked (HTTP Basic), then the authorization-code grant
/// (single-use code, redirect URI and PKCE checked; a refresh token too when offline_access was
/// authorized) or the refresh-token grant (`refresh`).
async fn token(
    State(s): State<Arc<IdpState>>,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    s.token_requests.fetch_add(1, Ordering::SeqCst);
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    *s.last_token_request.lock().unwrap() = Some((authorization, form.clone()));
    let Some(client_id) = basic_client(&headers) else {
        return (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Basic realm=\"fake-idp\"")],
            Json(json!({ "error": "invalid_client" })),
        )
            .into_response();
    };
    match form.get("grant_type").map(String::as_str) {
        Some("authorization_code") => {}
        Some("refresh_token") => return refresh(&s, &client_id, &form),
        _ => return oauth_error(StatusCode::BAD_REQUEST, "unsupported_grant_type"),
    }
    // A code is good for one exchange, whatever its outcome.
    let code = form.get("code").cloned().unwrap_or_default();
    let Some(grant) = s.codes.lock().unwrap().remove(&code) else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    };
    if grant.client_id != client_id
        || form.get("redirect_uri").map(String::as_str) != Some(grant.redirect_uri.as_str())
    {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    let verifier = form.get("code_verifier").cloned().unwrap_or_default();
    if verifier.len() < 43 || b64url(Sha256::digest(verifier.as_bytes())) != grant.challenge {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    let mut body = json!({
        "access_token": workbench_core::crypto::random_base62(32),
        "token_type": "Bearer",
        "expires_in": 300,
    });
    if has_scope(&grant.scope, "openid") {
        body["id_token"] = json!(id_token(
            &s,
            &grant.client_id,
            &grant.person,
            grant.nonce.as_deref()
        ));
        s.id_tokens_issued.fetch_add(1, Ordering::SeqCst);
    }
    if has_scope(&grant.scope, "offline_access") || s.refresh_tokens_unasked.load(Ordering::SeqCst)
    {
        let refresh_token = issue_refresh_token(
            &s,
            RefreshGrant {
                client_id: grant.client_id.clone(),
                sub: grant.person.sub.clone(),
                scope: grant.scope.clone(),
            },
        );
        body["refresh_token"] = json!(refresh_token);
    }
    token_answer(body)
}

fn has_scope(scope: &str, wanted: &str) -> bool {
    scope.split(' ').any(|s| s == wanted)
}

/// A token endpoint's 200: the body, not to be cached.
fn token_answer(body: Value) -> Response {
    (
        [
            (header::CACHE_CONTROL, "no-store"),
            (header::PRAGMA, "no-cache"),
        ],
        Json(body),
    )
        .into_response()
}

/// A new refresh token for `grant`, remembered as the last one issued.
fn issue_refresh_token(s: &IdpState, grant: RefreshGrant) -> String {
    let token = format!("rt-{}", workbench_core::crypto::random_base62(40));
    s.refresh_tokens
        .lock()
        .unwrap()
        .insert(token.clone(), grant);
    *s.last_refresh_token.lock().unwrap() = Some(token.clone());
    s.refresh_tokens_issued.fetch_add(1, Ordering::SeqCst);
    token
}

/// The refresh-token grant (the client already authenticated as `client_id`): 503 during an
/// outage (the token keeps working); `invalid_grant` for an unknown or used token, another
/// client's, or a disabled person's (then revoked); else a new access token, a new refresh
/// token that replaces the one used (rotation) and, unless told otherwise, an ID token with
/// the person's current claims and no nonce. A spoiled ID token (`tamper_next`) comes without
/// rotation: the token used keeps working and no new one is sent.
fn refresh(s: &IdpState, client_id: &str, form: &HashMap<String, String>) -> Response {
    s.refresh_requests.fetch_add(1, Ordering::SeqCst);
    if s.refresh_unavailable.load(Ordering::SeqCst) {
        return oauth_error(StatusCode::SERVICE_UNAVAILABLE, "temporarily_unavailable");
    }
    let used = form.get("refresh_token").cloned().unwrap_or_default();
    let Some(grant) = s.refresh_tokens.lock().unwrap().get(&used).cloned() else {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    };
    if grant.client_id != client_id {
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    if s.disabled.lock().unwrap().contains(&grant.sub) {
        s.refresh_tokens.lock().unwrap().remove(&used);
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    }
    let Some(person) = s.people.lock().unwrap().get(&grant.sub).cloned() else {
        s.refresh_tokens.lock().unwrap().remove(&used);
        return oauth_error(StatusCode::BAD_REQUEST, "invalid_grant");
    };
    let mut body = json!({
        "access_token": workbench_core::crypto::random_base62(32),
        "token_type": "Bearer",
        "expires_in": 300,
        "scope": grant.scope,
    });
    let with_id_token =
        has_scope(&grant.scope, "openid") && !s.refresh_without_id_token.load(Ordering::SeqCst);
    let tampered = with_id_token && s.tamper.lock().unwrap().is_some();
    if with_id_token {
        body["id_token"] = json!(id_token(s, &grant.client_id, &person, None));
        s.id_tokens_issued.fetch_add(1, Ordering::SeqCst);
    }
    if !tampered {
        s.refresh_tokens.lock().unwrap().remove(&used);
        body["refresh_token"] = json!(issue_refresh_token(s, grant));
    }
    token_answer(body)
}

fn sign(claims: &Value, alg: Algorithm, kid: &str, key: &EncodingKey) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, key).expect("sign the test ID token")
}

fn rsa_key(key: &TestKey) -> EncodingKey {
    EncodingKey::from_rsa_pem(key.pem.as_bytes()).expect("a test RSA key")
}

/// The ID token for `person` to `client_id` (with `nonce`: a sign-in's; None: a refresh's),
/// spoiled as the test asked (once).
fn id_token(s: &IdpState, client_id: &str, person: &Person, nonce: Option<&str>) -> String {
    let now = s.clock.now_ms() / 1000;
    let mut claims = json!({
        "iss": s.issuer,
        "sub": person.sub,
        "aud": client_id,
        "iat": now,
        "exp": now + 3600,
        "email": person.email,
        "email_verified": person.email_verified,
    });
    if let Some(nonce) = nonce {
        claims["nonce"] = json!(nonce);
    }
    if let Some(groups) = &person.groups {
        claims["groups"] = groups.clone();
    }
    let current = &KEYS[*s.current_key.lock().unwrap()];
    let tamper = s.tamper.lock().unwrap().take();
    match tamper {
        None => sign(&claims, Algorithm::RS256, current.kid, &rsa_key(current)),
        Some(Tamper::WrongAudience) => {
            claims["aud"] = json!("another-client");
            sign(&claims, Algorithm::RS256, current.kid, &rsa_key(current))
        }
        Some(Tamper::WrongIssuer) => {
            claims["iss"] = json!("https://idp.attacker.example");
            sign(&claims, Algorithm::RS256, current.kid, &rsa_key(current))
        }
        Some(Tamper::WrongNonce) => {
            claims["nonce"] = json!("not-the-nonce-of-this-sign-in");
            sign(&claims, Algorithm::RS256, current.kid, &rsa_key(current))
        }
        Some(Tamper::Expired) => {
            claims["iat"] = json!(now - 7200);
            claims["exp"] = json!(now - 3600);
            sign(&claims, Algorithm::RS256, current.kid, &rsa_key(current))
        }
        Some(Tamper::UnknownKey) => sign(
            &claims,
            Algorithm::RS256,
            ROGUE_KEY.kid,
            &rsa_key(&ROGUE_KEY),
        ),
        Some(Tamper::ForgedKid) => {
            sign(&claims, Algorithm::RS256, current.kid, &rsa_key(&ROGUE_KEY))
        }
        Some(Tamper::Hs256) => sign(
            &claims,
            Algorithm::HS256,
            current.kid,
            &EncodingKey::from_secret(CLIENT_SECRET.as_bytes()),
        ),
        Some(Tamper::AlgNone) => format!(
            "{}.{}.",
            b64url(json!({ "alg": "none", "typ": "JWT", "kid": current.kid }).to_string()),
            b64url(claims.to_string())
        ),
    }
}

/// The current key only: after `rotate_key` the old one is gone.
async fn jwks(State(s): State<Arc<IdpState>>) -> Json<Value> {
    s.jwks_requests.fetch_add(1, Ordering::SeqCst);
    let k = &KEYS[*s.current_key.lock().unwrap()];
    Json(json!({ "keys": [{
        "kty": "RSA",
        "kid": k.kid,
        "alg": "RS256",
        "use": "sig",
        "n": k.n,
        "e": k.e,
    }] }))
}

/// Starts the provider on 127.0.0.1:0; ID token times follow `clock` (pass the app's).
pub async fn start(clock: ManualClock) -> FakeIdp {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(IdpState {
        issuer: format!("http://{addr}"),
        clock,
        person: Mutex::new(None),
        people: Mutex::new(HashMap::new()),
        disabled: Mutex::new(HashSet::new()),
        codes: Mutex::new(HashMap::new()),
        refresh_tokens: Mutex::new(HashMap::new()),
        last_refresh_token: Mutex::new(None),
        refresh_tokens_unasked: AtomicBool::new(false),
        refresh_unavailable: AtomicBool::new(false),
        refresh_without_id_token: AtomicBool::new(false),
        current_key: Mutex::new(0),
        tamper: Mutex::new(None),
        discovery_issuer: Mutex::new(None),
        last_token_request: Mutex::new(None),
        discovery_requests: AtomicUsize::new(0),
        token_requests: AtomicUsize::new(0),
        id_tokens_issued: AtomicUsize::new(0),
        jwks_requests: AtomicUsize::new(0),
        refresh_requests: AtomicUsize::new(0),
        refresh_tokens_issued: AtomicUsize::new(0),
    });
    let router = Router::new()
        .route("/.well-known/openid-configuration", get(discovery))
        .route("/authorize", get(authorize))
        .route("/token", post(token))
        .route("/jwks", get(jwks))
        .with_state(state.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    FakeIdp { state }
}
