//! The message endpoint on a `horde send` connection, and the split of its notices when
//! streams run beside the messages: the message run keeps its own notices and the
//! connection's lifecycle events, the stream run gets the connection's events.

use anyhow::{Context, Result};
use horde_net::{Connection, EndpointConfig, MessageEndpoint, MessageHandle, MessageNotice};
use horde_proto::message::{codec, MessageConfig};
use horde_proto::Event;
use tokio::sync::mpsc;

use crate::shared_conn::{RunConn, SharedClose};

/// The message endpoint on a connection as a message run holds it: the calls, the
/// notices meant for it, and its share of the close.
pub struct MessageConn {
    pub(crate) api: MessageHandle,
    pub(crate) notices: mpsc::UnboundedReceiver<MessageNotice>,
    pub(crate) close: SharedClose,
}

/// Opens the message endpoint on `conn`, with pieces that fill `max_adu` (the
/// channels' smallest ADU) with their header. With `streams`, also the connection for a
/// stream run beside the message run: it gets every connection event that is not the
/// message layer's, and the connection closes when both runs are done.
pub async fn open(
    conn: Connection,
    max_adu: u32,
    streams: bool,
) -> Result<(MessageConn, Option<RunConn<mpsc::UnboundedReceiver<Event>>>)> {
    let defaults = EndpointConfig::default();
    let config = EndpointConfig {
        messages: MessageConfig {
            piece_size: max_adu
                .saturating_sub(codec::PIECE_HEADER_LEN as u32)
                .max(1),
            ..defaults.messages.clone()
        },
        ..defaults
    };
    let endpoint = MessageEndpoint::new(conn, config)
        .await
        .context("opening the message streams")?;
    let handle = endpoint.connection().clone();
    let close = SharedClose::new(handle.clone(), 1 + usize::from(streams));
    let (to_messages, notices) = mpsc::unbounded_channel();
    let (to_streams, stream_conn) = if streams {
        let (tx, events) = mpsc::unbounded_channel();
        let conn = RunConn {
            handle,
            events,
            close: close.clone(),
        };
        (Some(tx), Some(conn))
    } else {
        (None, None)
    };
    let api = endpoint.handle();
    tokio::spawn(route(endpoint, to_messages, to_streams));
    let conn = MessageConn {
        api,
        notices,
        close,
    };
    Ok((conn, stream_conn))
}

/// Passes the endpoint's notices on: the connection's events to the stream run, if any,
/// and the rest to the message run, which also gets the events that say how the
/// connection is doing. Ends with the connection, or when no run listens any more.
async fn route(
    mut endpoint: MessageEndpoint,
    messages: mpsc::UnboundedSender<MessageNotice>,
    streams: Option<mpsc::UnboundedSender<Event>>,
) {
    while let Some(notice) = endpoint.next_notice().await {
        let to_messages = match (notice, &streams) {
            (MessageNotice::Connection(e), Some(streams)) => {
                let lifecycle = matches!(
                    e,
                    Event::Connected | Event::Reconnecting { .. } | Event::Closed { .. }
                );
                let copy = lifecycle.then(|| MessageNotice::Connection(e.clone()));
                let _ = streams.send(e);
                copy
            }
            (notice, _) => Some(notice),
        };
        if let Some(n) = to_messages {
            let _ = messages.send(n);
        }
        if messages.is_closed() && streams.as_ref().is_none_or(|s| s.is_closed()) {
            return;
        }
    }
}
