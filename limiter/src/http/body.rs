//! [`HeldBody`]: a response body that holds something of its request's until it ends, and lets
//! it go then (when its last frame has been read or an error ended it) or when it is dropped
//! unfinished. What it holds does its work on being dropped: a permit goes back
//! ([`super::PermitBody`]), a real cost is settled ([`super::CostBody`]).

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

pin_project_lite::pin_project! {
    /// A response body holding `T` until it ends; see the module docs.
    #[derive(Debug)]
    pub struct HeldBody<B, T> {
        #[pin]
        inner: B,
        held: Option<T>,
    }
}

impl<B, T> HeldBody<B, T> {
    /// `inner`, holding `held` until it ends.
    pub(super) fn holding(inner: B, held: T) -> Self {
        HeldBody { inner, held: Some(held) }
    }

    /// `inner`, holding nothing: an unlimited request's, or a refusal's.
    pub(super) fn empty(inner: B) -> Self {
        HeldBody { inner, held: None }
    }

    /// Whether it still holds what it was given.
    pub(super) fn holds(&self) -> bool {
        self.held.is_some()
    }

    /// The body itself, still holding.
    pub fn get_ref(&self) -> &B {
        &self.inner
    }

    /// The body itself; what it held is let go.
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: Default, T> Default for HeldBody<B, T> {
    fn default() -> Self {
        HeldBody::empty(B::default())
    }
}

impl<B: Body, T> Body for HeldBody<B, T> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.project();
        let polled = this.inner.poll_frame(cx);
        if let Poll::Ready(None | Some(Err(_))) = polled {
            // The end, or an error that ends it: the work is over.
            this.held.take();
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
