//! The server's side of the wire, in place of tower-lsp-server's `Server`: that one stops reading
//! (and the process exits with status 0) at the first message it cannot decode. Here framing is
//! [`crate::framing`]'s, and a body that is not a JSON-RPC message is answered as JSON-RPC 2.0
//! says (parse error -32700 or invalid request -32600, with a null id when none can be read) and
//! then skipped; a response from the client that cannot be used, and bytes that are not a
//! message at all, are logged and skipped. Well-formed messages go to the tower-lsp service as
//! before, which answers unknown methods with -32601 and wrong parameters with -32602. Reading
//! stops only at the `exit` notification or at the end of the input.

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::{FutureExt, SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::UnboundedSender;
use tower_lsp_server::jsonrpc::{Error, ErrorCode, Id, Request, Response};
use tower_lsp_server::ls_types::{
    CancelParams, DidChangeTextDocumentParams, DidCloseTextDocumentParams,
    DidOpenTextDocumentParams,
};
use tower_lsp_server::{ClientSocket, LspService};
use tower_service::Service;

use crate::framing::{Frame, Framer};
use crate::server::Backend;

/// How many requests are handled at once; more wait, in order. Handlers only wait for the
/// analysis threads, so this bounds memory, not work.
const CONCURRENCY: usize = 32;

/// How long answers still being computed may delay the end of the session once reading has
/// stopped (a read stuck in a pathological document must not keep the process alive).
const DRAIN: Duration = Duration::from_secs(2);

/// How much is read from the input at a time.
const READ_BYTES: usize = 64 << 10;

type Answer = BoxFuture<'static, Option<Response>>;

/// Serves `service` on the two streams until `exit` or the end of the input.
pub(crate) async fn serve<I, O>(
    input: I,
    output: O,
    service: LspService<Backend>,
    socket: ClientSocket,
) where
    I: AsyncRead + Unpin,
    O: AsyncWrite + Unpin,
{
    let (server_requests, client_responses) = socket.split();
    let (server_requests, stop_forwarding) = futures::stream::abortable(server_requests);
    let (outgoing, outbox) = tokio::sync::mpsc::unbounded_channel::<String>();
    let (answers, pending) = futures::channel::mpsc::channel::<Answer>(CONCURRENCY);

    let answering = {
        let outgoing = outgoing.clone();
        pending
            .buffer_unordered(CONCURRENCY)
            .for_each(move |answer| {
                if let Some(response) = answer {
                    send(&outgoing, &response);
                }
                futures::future::ready(())
            })
    };
    let forwarding = {
        let outgoing = outgoing.clone();
        server_requests.for_each(move |request| {
            send(&outgoing, &request);
            futures::future::ready(())
        })
    };
    let mut reader = Reader {
        service,
        answers,
        client_responses,
        outgoing,
    };
    let reading = async move {
        reader.read_all(input).await;
        // Dropping the reader closes the channels the writer waits on.
        drop(reader);
        stop_forwarding.abort();
        tokio::time::sleep(DRAIN).await;
    };
    let writing = write_all(output, outbox);
    tokio::select! {
        _ = async { futures::join!(answering, forwarding, writing) } => {}
        () = reading => tracing::warn!("answers still being computed at exit were dropped"),
    }
}

/// The reading half: decodes messages and hands them to the service (requests and
/// notifications) or to `client_responses` (the client's answers to the server's requests).
struct Reader<R> {
    service: LspService<Backend>,
    answers: futures::channel::mpsc::Sender<Answer>,
    client_responses: R,
    outgoing: UnboundedSender<String>,
}

/// Whether to keep reading after a message.
enum Next {
    Continue,
    Stop,
}

impl<R: futures::Sink<Response> + Unpin> Reader<R> {
    async fn read_all<I: AsyncRead + Unpin>(&mut self, mut input: I) {
        let mut framer = Framer::default();
        let mut chunk = vec![0; READ_BYTES];
        loop {
            let read = match input.read(&mut chunk).await {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    tracing::error!("cannot read the client's messages: {error}");
                    break;
                }
            };
            framer.push(&chunk[..read]);
            while let Some(frame) = framer.next_frame() {
                if let Next::Stop = self.frame(frame).await {
                    return;
                }
            }
        }
        if let Some(frame) = framer.finish() {
            let _ = self.frame(frame).await;
        }
    }

    async fn frame(&mut self, frame: Frame) -> Next {
        match frame {
            Frame::Body(body) => self.body(&body).await,
            Frame::Overrun(body) => {
                tracing::error!(
                    "a message's Content-Length was longer than its body ({} bytes of JSON \
                     before the next header); handling it as that JSON",
                    body.len()
                );
                self.body(&body).await
            }
            Frame::Skipped(why) => {
                tracing::error!("skipped input that is not an LSP message: {why}");
                Next::Continue
            }
        }
    }

    async fn body(&mut self, body: &[u8]) -> Next {
        match decode(body) {
            Ok(Incoming::Request(request)) => self.request(request).await,
            Ok(Incoming::Response(response)) => {
                if self.client_responses.send(response).await.is_err() {
                    return Next::Stop;
                }
                Next::Continue
            }
            Err(Rejected { reply, why }) => {
                tracing::error!("rejected a message: {why}");
                if let Some(reply) = reply {
                    send(&self.outgoing, &*reply);
                }
                Next::Continue
            }
        }
    }

    async fn request(&mut self, request: Request) -> Next {
        if request.id().is_none()
            && let Err(why) = check_notification(request.method(), request.params())
        {
            tracing::error!("ignored a `{}` notification: {why}", request.method());
            return Next::Continue;
        }
        if futures::future::poll_fn(|cx| self.service.poll_ready(cx))
            .await
            .is_err()
        {
            return Next::Stop;
        }
        let exit = request.method() == "exit";
        let id = request.id().cloned();
        let answer = guard(self.service.call(request), id);
        if self.answers.send(answer).await.is_err() || exit {
            return Next::Stop;
        }
        Next::Continue
    }
}

/// An answer future that turns a panic in a handler into an internal error for the request,
/// instead of taking the whole server down.
fn guard(
    call: BoxFuture<'static, Result<Option<Response>, tower_lsp_server::ExitedError>>,
    id: Option<Id>,
) -> Answer {
    async move {
        match AssertUnwindSafe(call).catch_unwind().await {
            Ok(Ok(response)) => response,
            Ok(Err(_exited)) => None,
            Err(_panic) => {
                tracing::error!("a request handler panicked");
                id.map(|id| Response::from_error(id, Error::internal_error()))
            }
        }
    }
    .boxed()
}

/// A message as the service takes it.
#[derive(Debug)]
enum Incoming {
    Request(Request),
    Response(Response),
}

/// A body that is not a usable message: the error response JSON-RPC asks for, if any, and what
/// to log.
#[derive(Debug)]
struct Rejected {
    reply: Option<Box<Response>>,
    why: String,
}

impl Rejected {
    fn answered(id: Id, code: ErrorCode, why: String) -> Rejected {
        let error = Error {
            code,
            message: why.clone().into(),
            data: None,
        };
        Rejected {
            reply: Some(Box::new(Response::from_error(id, error))),
            why,
        }
    }

    fn invalid(id: Id, why: &str) -> Rejected {
        Rejected::answered(
            id,
            ErrorCode::InvalidRequest,
            format!("invalid request: {why}"),
        )
    }
}

/// Decodes a message body: UTF-8, then JSON, then a JSON-RPC 2.0 request, notification or
/// response (LSP has no batches).
fn decode(body: &[u8]) -> Result<Incoming, Rejected> {
    let text = std::str::from_utf8(body).map_err(|error| {
        Rejected::answered(
            Id::Null,
            ErrorCode::ParseError,
            format!("parse error: the body is not UTF-8 ({error})"),
        )
    })?;
    let value: Value = serde_json::from_str(text).map_err(|error| {
        Rejected::answered(
            Id::Null,
            ErrorCode::ParseError,
            format!("parse error: the body is not JSON ({error})"),
        )
    })?;
    let Value::Object(object) = &value else {
        let what = match value {
            Value::Array(_) => "a batch (an array); LSP has no batches",
            Value::Null
            | Value::Bool(_)
            | Value::Number(_)
            | Value::String(_)
            | Value::Object(_) => "the message is not a JSON object",
        };
        return Err(Rejected::invalid(Id::Null, what));
    };
    let id = match object.get("id") {
        None => None,
        Some(id) => Some(
            serde_json::from_value::<Id>(id.clone())
                .ok()
                .filter(|_| !id.is_f64())
                .ok_or_else(|| Rejected::invalid(Id::Null, "`id` is not a number or a string"))?,
        ),
    };
    let reply_id = id.clone().unwrap_or(Id::Null);
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return Err(Rejected::invalid(reply_id, "`jsonrpc` is not \"2.0\""));
    }
    match object.get("method") {
        Some(Value::String(_)) => serde_json::from_value(value)
            .map(Incoming::Request)
            .map_err(|error| Rejected::invalid(reply_id, &error.to_string())),
        Some(_) => Err(Rejected::invalid(reply_id, "`method` is not a string")),
        None if id.is_some() && (object.contains_key("result") || object.contains_key("error")) => {
            serde_json::from_value(value)
                .map(Incoming::Response)
                .map_err(|error| Rejected {
                    reply: None,
                    why: format!("a response that cannot be read: {error}"),
                })
        }
        None => Err(Rejected::invalid(
            reply_id,
            "neither a request (`method`) nor a response (`result` or `error`)",
        )),
    }
}

/// Why a notification the server handles cannot be handled. Notifications get no answer, so
/// wrong parameters can only be logged; tower-lsp-server drops them without a word.
fn check_notification(method: &str, params: Option<&Value>) -> Result<(), String> {
    match method {
        "textDocument/didOpen" => fits::<DidOpenTextDocumentParams>(params),
        "textDocument/didChange" => fits::<DidChangeTextDocumentParams>(params),
        "textDocument/didClose" => fits::<DidCloseTextDocumentParams>(params),
        "$/cancelRequest" => fits::<CancelParams>(params),
        _ => Ok(()),
    }
}

fn fits<T: DeserializeOwned>(params: Option<&Value>) -> Result<(), String> {
    let params = params.ok_or("no params")?;
    T::deserialize(params)
        .map(drop)
        .map_err(|error| format!("wrong params: {error}"))
}

fn send(outgoing: &UnboundedSender<String>, message: &impl serde::Serialize) {
    match serde_json::to_string(message) {
        Ok(text) => {
            // The writer is gone only once the session is over.
            let _ = outgoing.send(text);
        }
        Err(error) => tracing::error!("cannot encode a message: {error}"),
    }
}

/// Writes every message sent to `outbox`, framed, until every sender is gone.
async fn write_all<O: AsyncWrite + Unpin>(
    mut output: O,
    mut outbox: tokio::sync::mpsc::UnboundedReceiver<String>,
) {
    while let Some(message) = outbox.recv().await {
        let header = format!("Content-Length: {}\r\n\r\n", message.len());
        let written = async {
            output.write_all(header.as_bytes()).await?;
            output.write_all(message.as_bytes()).await?;
            output.flush().await
        };
        if let Err(error) = written.await {
            tracing::error!("cannot write to the client: {error}");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rejected(body: &str) -> (i64, Value) {
        let Err(Rejected {
            reply: Some(reply), ..
        }) = decode(body.as_bytes())
        else {
            panic!("{body} is answered with an error");
        };
        let (id, result) = reply.into_parts();
        let error = result.expect_err("an error");
        (error.code.code(), serde_json::to_value(id).expect("id"))
    }

    #[test]
    fn bodies_that_are_not_json_rpc_get_the_errors_json_rpc_names() {
        assert_eq!(rejected("{\"jsonrpc\""), (-32700, Value::Null));
        assert_eq!(rejected(""), (-32700, Value::Null));
        assert_eq!(rejected("[]"), (-32600, Value::Null));
        assert_eq!(rejected("42"), (-32600, Value::Null));
        assert_eq!(rejected(r#"{"jsonrpc":"2.0"}"#), (-32600, Value::Null));
        assert_eq!(rejected(r#"{"jsonrpc":"2.0","id":7}"#), (-32600, 7.into()));
        assert_eq!(
            rejected(r#"{"jsonrpc":"1.0","id":"a","method":"x"}"#),
            (-32600, "a".into())
        );
        assert_eq!(
            rejected(r#"{"jsonrpc":"2.0","id":3,"method":5}"#),
            (-32600, 3.into())
        );
        assert_eq!(
            rejected(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"x"}"#),
            (-32600, Value::Null)
        );
        assert_eq!(
            rejected(r#"{"jsonrpc":"2.0","id":1.5,"method":"x"}"#),
            (-32600, Value::Null)
        );
    }

    #[test]
    fn non_utf8_is_a_parse_error() {
        let Err(Rejected {
            reply: Some(reply), ..
        }) = decode(b"{\"a\":\"\xff\"}")
        else {
            panic!("answered");
        };
        assert_eq!(reply.error().map(|e| e.code.code()), Some(-32700));
    }

    #[test]
    fn requests_notifications_and_responses_are_told_apart() {
        let request = decode(br#"{"jsonrpc":"2.0","id":1,"method":"shutdown"}"#);
        assert!(matches!(request, Ok(Incoming::Request(_))), "{request:?}");
        let note = decode(br#"{"jsonrpc":"2.0","method":"exit"}"#);
        assert!(matches!(note, Ok(Incoming::Request(_))), "{note:?}");
        let response = decode(br#"{"jsonrpc":"2.0","id":1,"result":null}"#);
        assert!(
            matches!(response, Ok(Incoming::Response(_))),
            "{response:?}"
        );
        let broken = decode(br#"{"jsonrpc":"2.0","id":1,"error":5}"#);
        assert!(
            matches!(broken, Err(Rejected { reply: None, .. })),
            "a response is never answered: {broken:?}"
        );
    }

    #[test]
    fn notifications_with_wrong_params_are_caught() {
        let wrong = serde_json::json!({"textDocument": 5});
        assert!(check_notification("textDocument/didOpen", Some(&wrong)).is_err());
        assert!(check_notification("textDocument/didChange", None).is_err());
        assert!(check_notification("initialized", Some(&wrong)).is_ok());
        let open = serde_json::json!({"textDocument": {"uri": "file:///a.py",
            "languageId": "python", "version": 1, "text": ""}});
        assert!(check_notification("textDocument/didOpen", Some(&open)).is_ok());
    }
}
