//! The wire words: what core's REST answers and the portal's server functions carried as
//! strings before these enums, byte for byte.

use crate::calls::{CallStatus, ConfirmationStatus};
use crate::catalog::SideEffects;
use crate::connections::AccountState;
use crate::upstream::{BreakerState, ServerState, ToolState};

fn json<T: serde::Serialize>(v: T) -> String {
    serde_json::to_string(&v).unwrap()
}

#[test]
fn statuses_serialize_as_the_words_they_replaced() {
    assert_eq!(
        json(CallStatus::AwaitingConfirmation),
        "\"awaiting_confirmation\""
    );
    assert_eq!(json(ConfirmationStatus::Expired), "\"expired\"");
    assert_eq!(json(BreakerState::HalfOpen), "\"half_open\"");
    assert_eq!(json(ServerState::Degraded), "\"degraded\"");
    assert_eq!(json(ToolState::PendingReview), "\"pending_review\"");
    assert_eq!(json(AccountState::NoAccountNeeded), "\"no account needed\"");
    assert_eq!(json(AccountState::NotConnected), "\"not connected\"");
    assert_eq!(json(SideEffects::None), "\"none\"");
}

#[test]
fn every_word_parses_back_and_others_are_refused() {
    for &s in CallStatus::ALL {
        assert_eq!(CallStatus::parse(s.as_str()), Some(s));
        let back: CallStatus = serde_json::from_str(&json(s)).unwrap();
        assert_eq!(back, s);
    }
    let err = "sideways".parse::<BreakerState>().unwrap_err();
    assert_eq!(err.to_string(), "unknown breaker state \"sideways\"");
    assert!(serde_json::from_str::<SideEffects>("\"Write\"").is_err());
}

#[test]
fn every_call_status_is_an_audit_status_with_the_same_word() {
    use crate::audit::AuditStatus;
    for &s in CallStatus::ALL {
        assert_eq!(AuditStatus::from(s).as_str(), s.as_str());
    }
    // A decision row's word, which no call has.
    assert_eq!(AuditStatus::parse("approved"), Some(AuditStatus::Approved));
    assert_eq!(CallStatus::parse("approved"), None);
}
