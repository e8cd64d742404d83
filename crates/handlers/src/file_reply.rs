//! `file_reply`: answers each message with a file written to the thread and ends the session,
//! the file attached to its reply — an agent whose every session completes with a file result
//! (over A2A: a task COMPLETED with a file artifact).

use async_trait::async_trait;
use duet_runtime::{Handler, HandlerError, Message, ThreadState};

/// Answers a message with the file `/attachments/session-<n>/<name>` (`<n>` the session's number,
/// `<name>` the env var `FILE_REPLY_NAME`, default `answer.txt`), `text/plain`: a text naming
/// what was received — the message's text and each file it carried (path, type, size). Its reply
/// `Received.` carries the file, and the session ends with the result `received`. One file per
/// session, so a finished session's file is not replaced by the next one's.
#[derive(Clone, Copy, Debug, Default)]
pub struct FileReply;

/// What the answer file says about `message`.
fn answer(message: &Message) -> String {
    let mut text = format!(
        "Received: {}\n",
        message.content.as_deref().unwrap_or_default()
    );
    for a in &message.attachments {
        text.push_str(&format!(
            "Attached: {} ({}, {} bytes)\n",
            a.path, a.mime_type, a.size
        ));
    }
    text
}

#[async_trait]
impl Handler for FileReply {
    async fn handle(
        &self,
        state: &mut ThreadState<'_>,
        message: &Message,
    ) -> Result<(), HandlerError> {
        let name = state
            .env("FILE_REPLY_NAME")
            .unwrap_or_else(|| "answer.txt".to_owned());
        let path = format!("/attachments/session-{}/{name}", state.session());
        let written = state
            .write_file(&path, answer(message).as_bytes(), Some("text/plain"))
            .await?;
        state
            .reply_with_files("Received.", &[written.path.as_str()])
            .await?;
        state.stop_session(Some("received".to_owned()));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use duet_runtime::{AttachmentRef, Role};

    #[test]
    fn the_answer_names_the_text_and_each_file() {
        let mut m = Message::text(1, 1, Role::User, None, "hello".to_owned(), 0);
        assert_eq!(answer(&m), "Received: hello\n");
        m.attachments.push(AttachmentRef {
            path: "/attachments/a.csv".to_owned(),
            name: "a.csv".to_owned(),
            mime_type: "text/csv".to_owned(),
            size: 12,
            width: None,
            height: None,
            description: None,
        });
        assert_eq!(
            answer(&m),
            "Received: hello\nAttached: /attachments/a.csv (text/csv, 12 bytes)\n"
        );
    }
}
