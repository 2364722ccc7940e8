//! What the server counts for a queue: its DLQ's entries (one subject each) and its
//! counted events, and the DLQ size alerts that follow the count of entries.
//!
//! Alert hooks live in the connection ([`JetStream`]); they see the changes this process
//! makes when it makes them, and another process's changes at the next check.

use std::collections::HashMap;
use std::sync::Arc;

use deadletter::dlq::DlqAlert;
use deadletter::Result;
use futures_util::{StreamExt, TryStreamExt};

use crate::client::backend;
use crate::names::Event;
use crate::namespace::{Hook, JetStream};

/// Entries in `queue`'s DLQ: one subject each.
pub(crate) async fn count_entries(js: &JetStream, queue: &str) -> Result<u64> {
    let names = &js.inner.names;
    let stream = js.stream(&names.dlq_stream()).await?;
    let mut subjects = stream
        .info_with_subjects(names.dlq_filter(queue))
        .await
        .map_err(|e| backend("count DLQ entries", e))?;
    let mut n = 0u64;
    while let Some(s) = subjects.next().await {
        n += s.map_err(|e| backend("count DLQ entries", e))?.1 as u64;
    }
    Ok(n)
}

/// The counted events of `queue`.
pub(crate) async fn event_counts(js: &JetStream, queue: &str) -> Result<HashMap<Event, u64>> {
    let names = &js.inner.names;
    let stream = js.stream(&names.events_stream()).await?;
    let mut subjects = stream
        .info_with_subjects(names.events_of(queue))
        .await
        .map_err(|e| backend("read the counters", e))?;
    let mut out = HashMap::new();
    while let Some((subject, count)) = subjects
        .try_next()
        .await
        .map_err(|e| backend("read the counters", e))?
    {
        if let Some(e) = Event::from_subject(&subject) {
            *out.entry(e).or_default() += count as u64;
        }
    }
    Ok(out)
}

impl JetStream {
    /// Registers an alert hook on the DLQ of `queue`; checks it at once.
    pub(crate) fn add_alert(
        &self,
        queue: &str,
        threshold: u64,
        callback: Arc<dyn Fn(&DlqAlert) + Send + Sync>,
    ) -> Result<()> {
        self.inner.alerts.lock().push(Hook {
            queue: queue.to_string(),
            threshold: threshold.max(1),
            above: false,
            callback,
        });
        self.inner.conn.run(self.check_alerts(queue))
    }

    /// Fires the hooks of `queue`'s DLQ that its size crossed since the last check (the
    /// changes this process made; another process's changes are seen at the next check).
    pub(crate) async fn check_alerts(&self, queue: &str) -> Result<()> {
        if !self.inner.alerts.lock().iter().any(|h| h.queue == queue) {
            return Ok(());
        }
        let size = count_entries(self, queue).await?;
        let dlq = self.dlq_name(queue);
        let mut fired = Vec::new();
        for hook in self.inner.alerts.lock().iter_mut() {
            if hook.queue != queue {
                continue;
            }
            let above = size >= hook.threshold;
            if above != hook.above {
                hook.above = above;
                fired.push((
                    Arc::clone(&hook.callback),
                    DlqAlert::new(dlq.clone(), size, hook.threshold, above),
                ));
            }
        }
        for (callback, alert) in fired {
            callback(&alert);
        }
        Ok(())
    }
}
