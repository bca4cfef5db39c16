//! Where an outbound delivery (a webhook event, a scheduled callback) is in its life, and which
//! system it belongs to. Core's delivery outbox stores these words; the portal shows them.

text_enum! {
    /// A delivery's state in the outbox.
    pub enum DeliveryStatus ("delivery status") {
        /// Waiting for its next attempt (`next_attempt_at`).
        Pending = "pending",
        /// Claimed by an instance under a lease; when the lease runs out it is claimed again.
        Delivering = "delivering",
        /// A 2xx answer was received.
        Delivered = "delivered",
        /// Given up: a permanent failure, or the attempts ran out.
        Failed = "failed",
        /// Cancelled before it was delivered (a callback's owner cancelled it).
        Cancelled = "cancelled",
    }
}

text_enum! {
    /// Which system a delivery belongs to: it decides the body's envelope and the URL rules.
    pub enum DeliveryKind ("delivery kind") {
        /// The project webhook (D15): signed with the vault secret the admin named.
        Webhook = "webhook",
        /// A scheduled callback (`schedule.callback`): signed with the project's signing secret.
        Callback = "callback",
    }
}

text_enum! {
    /// Where a scheduled callback is, as the API and the portal show it: `scheduled` while its
    /// delivery is pending or under way, then how it ended.
    pub enum CallbackStatus ("callback status") {
        Scheduled = "scheduled",
        Delivered = "delivered",
        Failed = "failed",
        Cancelled = "cancelled",
    }
}

impl CallbackStatus {
    /// The delivery states this status covers.
    pub fn deliveries(self) -> &'static [DeliveryStatus] {
        match self {
            CallbackStatus::Scheduled => &[DeliveryStatus::Pending, DeliveryStatus::Delivering],
            CallbackStatus::Delivered => &[DeliveryStatus::Delivered],
            CallbackStatus::Failed => &[DeliveryStatus::Failed],
            CallbackStatus::Cancelled => &[DeliveryStatus::Cancelled],
        }
    }
}

impl From<DeliveryStatus> for CallbackStatus {
    fn from(s: DeliveryStatus) -> CallbackStatus {
        match s {
            DeliveryStatus::Pending | DeliveryStatus::Delivering => CallbackStatus::Scheduled,
            DeliveryStatus::Delivered => CallbackStatus::Delivered,
            DeliveryStatus::Failed => CallbackStatus::Failed,
            DeliveryStatus::Cancelled => CallbackStatus::Cancelled,
        }
    }
}
