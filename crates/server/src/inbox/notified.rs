//! The "Notified" section of a question's page (a park's, `item.rs`; a tool call's step,
//! `decision.rs`): each notification sent about it that the viewer may see — its channel, where
//! it went (a URL without its userinfo and query), its event, how it stands and its last error.

use duet_server_store::Delivery;
use maud::{Markup, html};

use super::layout;
use crate::notify::shown::DeliveryView;

/// The section, or nothing when no notification was sent (or none the viewer may see).
pub(crate) fn section(deliveries: &[Delivery], now: i64) -> Markup {
    html! {
        @if !deliveries.is_empty() {
            section.notified #notified aria-labelledby="notified-title" {
                h2 #notified-title { "Notified" }
                div.table-wrap { table.history {
                    thead { tr { th { "Channel" } th { "To" } th { "Event" } th { "Status" } th { "Last error" } } }
                    tbody {
                        @for d in deliveries {
                            @let v = DeliveryView::of(d, None);
                            tr data-delivery=(v.id) data-status=(v.status) {
                                td { (v.channel) }
                                td { code { (v.target) } }
                                td { (v.event) }
                                td {
                                    (v.status)
                                    @if v.attempts > 0 { " (" (v.attempts) @if v.attempts == 1 { " failed attempt" } @else { " failed attempts" } ")" }
                                    @if let Some(at) = v.finished_at { ", " (layout::ago(at, now)) }
                                }
                                td { (v.last_error.as_deref().unwrap_or("")) }
                            }
                        }
                    }
                } }
            }
        }
    }
}
