//! The per-user cap on proxy requests in flight: a counter the app state owns and the proxy
//! takes a slot from for each request, given back when the request ends.

use std::sync::Arc;

/// Proxy requests in flight per user, capped (`--proxy-max-concurrent-per-user`).
#[derive(Default)]
pub struct ProxySlots {
    in_flight: std::sync::Mutex<std::collections::HashMap<String, usize>>,
}

impl ProxySlots {
    /// A slot for `user_id` if fewer than `max` are taken; it is given back when dropped.
    pub(crate) fn take(self: &Arc<Self>, user_id: &str, max: usize) -> Option<ProxySlot> {
        let mut map = self.in_flight.lock().expect("proxy slots lock");
        let n = map.entry(user_id.to_owned()).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(ProxySlot {
            slots: self.clone(),
            user_id: user_id.to_owned(),
        })
    }
}

/// One proxy request in flight.
pub(crate) struct ProxySlot {
    slots: Arc<ProxySlots>,
    user_id: String,
}

impl Drop for ProxySlot {
    fn drop(&mut self) {
        let mut map = self.slots.in_flight.lock().expect("proxy slots lock");
        if let Some(n) = map.get_mut(&self.user_id) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.user_id);
            }
        }
    }
}
