//! The LSP base protocol's framing, read leniently: `Content-Length` header blocks and the bodies
//! they announce, cut from a byte stream that may hold anything. A header block that cannot be
//! used (no `Content-Length`, a value that is not a number or larger than [`MAX_BODY_BYTES`], a
//! line that is not a header) is reported and skipped by scanning for the next `Content-Length`,
//! so that one bad message never ends the session. Deciding what a body means is
//! [`crate::transport`]'s job; this module only finds where messages start and end.

/// The largest body accepted: far above any document an editor sends, small enough that a wrong
/// length cannot make the server wait for (or buffer) gigabytes.
pub(crate) const MAX_BODY_BYTES: usize = 64 << 20;

/// A header block longer than this without its terminating blank line is garbage, not a header
/// still arriving.
const MAX_HEADER_BYTES: usize = 8 << 10;

/// The header that starts every message, and where resynchronisation looks for the next one.
const CONTENT_LENGTH: &[u8] = b"content-length";

/// What the framer found next in the stream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Frame {
    /// A message body, exactly as many bytes as its header announced.
    Body(Vec<u8>),
    /// A body whose `Content-Length` was longer than the message: the next message's header
    /// started inside it. The bytes before that header are kept as the body.
    Overrun(Vec<u8>),
    /// Bytes that were dropped because they are not a usable message, and why.
    Skipped(String),
}

/// Cuts messages from the bytes pushed into it.
#[derive(Debug, Default)]
pub(crate) struct Framer {
    buffer: Vec<u8>,
    /// While a body is incomplete: how far into the buffer an overrunning header was looked for,
    /// so that a large body arriving in chunks is scanned once, not once per chunk.
    scanned: usize,
}

impl Framer {
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    /// The next complete frame, or `None` until more bytes arrive.
    pub(crate) fn next_frame(&mut self) -> Option<Frame> {
        self.skip_blank_lines();
        if self.buffer.is_empty() {
            return None;
        }
        let Some(header_end) = find(&self.buffer, b"\r\n\r\n", 0) else {
            if self.buffer.len() > MAX_HEADER_BYTES {
                return Some(self.resynchronise(format!(
                    "no end of a header block in {MAX_HEADER_BYTES} bytes"
                )));
            }
            return None;
        };
        let body_start = header_end + 4;
        let length = match content_length(&self.buffer[..header_end]) {
            Ok(length) if length <= MAX_BODY_BYTES => length,
            Ok(length) => {
                return Some(self.resynchronise(format!(
                    "Content-Length {length} is over the limit of {MAX_BODY_BYTES} bytes"
                )));
            }
            Err(why) => return Some(self.resynchronise(why)),
        };
        self.body(body_start, length)
    }

    /// At the end of the stream: what is left that never became a message.
    pub(crate) fn finish(&mut self) -> Option<Frame> {
        self.skip_blank_lines();
        if self.buffer.is_empty() {
            return None;
        }
        let left = std::mem::take(&mut self.buffer);
        Some(Frame::Skipped(format!(
            "the input ended inside a message: {}",
            excerpt(&left)
        )))
    }

    /// The body that starts at `start`, once all of it (or the next message's header inside it)
    /// has arrived.
    fn body(&mut self, start: usize, length: usize) -> Option<Frame> {
        let available = &self.buffer[start..];
        let complete = available.len() >= length;
        let candidate = &available[..length.min(available.len())];
        if complete && serde_json::from_slice::<serde::de::IgnoredAny>(candidate).is_ok() {
            let body = candidate.to_vec();
            self.consume(start + length);
            return Some(Frame::Body(body));
        }
        // A body that is not JSON, or one still arriving, may have been given too long a length:
        // the next message's header then starts inside it, after a complete JSON value. The
        // header may run past the announced end, so look a header's length further.
        let reach = available.len().min(length + CONTENT_LENGTH.len() - 1);
        let from = if complete {
            1
        } else {
            self.scanned
                .saturating_sub(start + CONTENT_LENGTH.len())
                .max(1)
        };
        if let Some(end) = overrun_at(&available[..reach], from) {
            let body = available[..end].to_vec();
            self.consume(start + end);
            return Some(Frame::Overrun(body));
        }
        let header_may_follow = reach < length + CONTENT_LENGTH.len() - 1
            && ends_with_header_start(&available[..reach]);
        if !complete || header_may_follow {
            self.scanned = self.buffer.len();
            return None;
        }
        let body = candidate.to_vec();
        self.consume(start + length);
        Some(Frame::Body(body))
    }

    fn consume(&mut self, bytes: usize) {
        self.buffer.drain(..bytes);
        self.scanned = 0;
    }

    /// Drops the bytes before the next `Content-Length` after the first byte (all of them but a
    /// possible start of one when there is none yet) and says why.
    fn resynchronise(&mut self, why: String) -> Frame {
        let cut = find_ignoring_case(&self.buffer, CONTENT_LENGTH, 1).unwrap_or_else(|| {
            let kept = header_start_at_end(&self.buffer);
            (self.buffer.len() - kept).max(1)
        });
        let dropped: Vec<u8> = self.buffer.drain(..cut).collect();
        self.scanned = 0;
        Frame::Skipped(format!("{why}; skipped {}", excerpt(&dropped)))
    }

    /// Blank lines between messages carry nothing; some clients write one after each body.
    fn skip_blank_lines(&mut self) {
        let blank = self
            .buffer
            .iter()
            .take_while(|&&byte| byte == b'\r' || byte == b'\n')
            .count();
        if blank > 0 {
            self.buffer.drain(..blank);
            self.scanned = 0;
        }
    }
}

/// The `Content-Length` of a header block (without its blank line), or why there is none.
fn content_length(block: &[u8]) -> Result<usize, String> {
    let Ok(text) = std::str::from_utf8(block) else {
        return Err("a header block that is not ASCII".to_owned());
    };
    let mut length = None;
    for line in text.split("\r\n") {
        let Some((name, value)) = line.split_once(':') else {
            return Err(format!("a header line without a colon: {line:?}"));
        };
        let name = name.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let value = value.trim();
            match value.parse::<usize>() {
                Ok(parsed) if length.is_none_or(|known| known == parsed) => length = Some(parsed),
                Ok(_) => return Err("two different Content-Length headers".to_owned()),
                Err(_) => return Err(format!("Content-Length {value:?} is not a length")),
            }
        } else if !name.eq_ignore_ascii_case("content-type") {
            tracing::debug!("ignored the header {name:?}");
        }
    }
    length.ok_or_else(|| format!("a header block without Content-Length: {text:?}"))
}

/// Where the next message's header starts inside `body` (at or after `from`), when the bytes
/// before it are one complete JSON value.
fn overrun_at(body: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while let Some(found) = find_ignoring_case(body, CONTENT_LENGTH, at) {
        if serde_json::from_slice::<serde::de::IgnoredAny>(&body[..found]).is_ok() {
            return Some(found);
        }
        at = found + 1;
    }
    None
}

/// How many of the last bytes of `bytes` are the first bytes (not all) of a `Content-Length`
/// header, which the next bytes to arrive may complete.
fn header_start_at_end(bytes: &[u8]) -> usize {
    (1..CONTENT_LENGTH.len())
        .rev()
        .find(|&taken| {
            bytes.len() >= taken
                && bytes[bytes.len() - taken..].eq_ignore_ascii_case(&CONTENT_LENGTH[..taken])
        })
        .unwrap_or(0)
}

/// Whether `bytes` are a complete JSON value followed by the first bytes (not all) of a
/// `Content-Length` header: an overrun whose header has not fully arrived.
fn ends_with_header_start(bytes: &[u8]) -> bool {
    let taken = header_start_at_end(bytes);
    taken > 0
        && taken < bytes.len()
        && serde_json::from_slice::<serde::de::IgnoredAny>(&bytes[..bytes.len() - taken]).is_ok()
}

fn find(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|window| window == needle)
        .map(|at| at + from)
}

fn find_ignoring_case(haystack: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    haystack
        .get(from..)?
        .windows(needle.len())
        .position(|window| window.eq_ignore_ascii_case(needle))
        .map(|at| at + from)
}

/// The start of some dropped bytes, for a log line.
fn excerpt(bytes: &[u8]) -> String {
    const SHOWN: usize = 80;
    let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN)]).into_owned();
    if bytes.len() > SHOWN {
        format!("{} bytes starting {shown:?}", bytes.len())
    } else {
        format!("{} bytes {shown:?}", bytes.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXIT: &str = r#"{"jsonrpc":"2.0","method":"exit"}"#;

    fn framed(body: &str) -> String {
        format!("Content-Length: {}\r\n\r\n{body}", body.len())
    }

    /// Every frame the framer cuts from `input`, fed in chunks of `chunk` bytes.
    fn frames(input: &[u8], chunk: usize) -> Vec<Frame> {
        let mut framer = Framer::default();
        let mut found = Vec::new();
        for piece in input.chunks(chunk) {
            framer.push(piece);
            while let Some(frame) = framer.next_frame() {
                found.push(frame);
            }
        }
        found.extend(framer.finish());
        found
    }

    fn is_skip(frame: &Frame) -> bool {
        matches!(frame, Frame::Skipped(_))
    }

    #[test]
    fn cuts_messages_whole_or_in_pieces() {
        let input = format!("{}{}", framed(EXIT), framed("{}"));
        for chunk in [1, 7, 1000] {
            assert_eq!(
                frames(input.as_bytes(), chunk),
                vec![Frame::Body(EXIT.into()), Frame::Body(b"{}".to_vec())],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn header_names_ignore_case_and_content_type_is_allowed() {
        let input = format!(
            "content-length: {}\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n{EXIT}",
            EXIT.len()
        );
        assert_eq!(frames(input.as_bytes(), 5), vec![Frame::Body(EXIT.into())]);
    }

    #[test]
    fn unusable_headers_are_skipped_up_to_the_next_message() {
        let bad_headers = [
            format!("Content-Type: text/plain\r\n\r\n{EXIT}"),
            format!("Content-Length: abc\r\n\r\n{EXIT}"),
            format!("Content-Length: -5\r\n\r\n{EXIT}"),
            format!("Content-Length: 99999999999999999999999\r\n\r\n{EXIT}"),
            format!("Content-Length: {}\r\n\r\n{EXIT}", MAX_BODY_BYTES + 1),
            "garbage".to_owned(),
            "Content-Length 12\r\n\r\n".to_owned(),
        ];
        for bad in bad_headers {
            let input = format!("{bad}{}", framed(EXIT));
            let found = frames(input.as_bytes(), 3);
            let last = found.last();
            assert_eq!(
                last,
                Some(&Frame::Body(EXIT.into())),
                "after {bad:?}: {found:?}"
            );
            assert!(
                found[..found.len() - 1].iter().all(is_skip),
                "{bad:?}: {found:?}"
            );
            assert!(!found[..found.len() - 1].is_empty(), "{bad:?} was reported");
        }
    }

    #[test]
    fn a_body_that_is_not_json_is_still_a_frame() {
        let input = format!("{}{}", framed("{not json"), framed(EXIT));
        assert_eq!(
            frames(input.as_bytes(), 4),
            vec![Frame::Body(b"{not json".to_vec()), Frame::Body(EXIT.into())]
        );
        let exit = framed(EXIT);
        let bytes = [
            b"Content-Length: 3\r\n\r\n\xff\xfe\x00".as_slice(),
            exit.as_bytes(),
        ];
        assert_eq!(
            frames(&bytes.concat(), 64),
            vec![Frame::Body(vec![0xff, 0xfe, 0]), Frame::Body(EXIT.into())]
        );
    }

    #[test]
    fn too_long_a_length_gives_back_the_next_message() {
        let input = format!(
            "Content-Length: {}\r\n\r\n{EXIT}{}",
            EXIT.len() + 10,
            framed("{}")
        );
        for chunk in [1, 13, 1000] {
            assert_eq!(
                frames(input.as_bytes(), chunk),
                vec![Frame::Overrun(EXIT.into()), Frame::Body(b"{}".to_vec())],
                "chunks of {chunk}"
            );
        }
    }

    #[test]
    fn too_short_a_length_loses_only_its_own_message() {
        let input = format!("Content-Length: 10\r\n\r\n{EXIT}{}", framed("{}"));
        let found = frames(input.as_bytes(), 6);
        assert_eq!(found[0], Frame::Body(EXIT.as_bytes()[..10].to_vec()));
        assert!(is_skip(&found[1]), "{found:?}");
        assert_eq!(found[2..], [Frame::Body(b"{}".to_vec())]);
    }

    #[test]
    fn a_truncated_stream_is_reported_at_its_end() {
        let input = "Content-Length: 50\r\n\r\n{\"jsonrpc\"";
        let found = frames(input.as_bytes(), 8);
        assert_eq!(found.len(), 1);
        assert!(is_skip(&found[0]), "{found:?}");
    }

    #[test]
    fn garbage_without_any_header_is_dropped_in_bounded_pieces() {
        let mut framer = Framer::default();
        framer.push(&vec![b'x'; MAX_HEADER_BYTES * 3]);
        let mut skipped = 0;
        while let Some(frame) = framer.next_frame() {
            assert!(is_skip(&frame));
            skipped += 1;
        }
        assert!(skipped >= 1);
        assert!(
            framer.buffer.is_empty(),
            "nothing that could start a header is kept"
        );
        framer.push(b"junk\r\n\r\nConte");
        assert!(matches!(framer.next_frame(), Some(Frame::Skipped(_))));
        assert_eq!(framer.buffer, b"Conte", "a header's start is kept");
        framer.push(&framed(EXIT).as_bytes()[5..]);
        assert_eq!(framer.next_frame(), Some(Frame::Body(EXIT.into())));
    }
}
