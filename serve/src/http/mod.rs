//! HTTP around the inference core (as TEI's `router/src/http`): the router and the OpenAPI
//! document, the middleware, the handlers, the error bodies, and the listeners. The only place with axum,
//! hyper and http types.

pub mod error;
pub mod handlers;
pub mod listen;
pub mod middleware;
pub mod router;
