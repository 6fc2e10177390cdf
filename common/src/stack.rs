//! `--stack`: which handler every connection runs — the routes alone, or the same routes
//! under a framework layer. Above both, so that neither the routes nor the framework
//! names the other's caller.

use crate::handler::Handler;
use crate::{framework, routes};

/// Which handler every connection runs (`--stack`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Stack {
    /// The routes with nothing in between.
    #[default]
    Raw,
    /// A framework layer over the same routes (see [`crate::framework`]).
    Framework,
}

impl Stack {
    /// This stack's handler.
    pub fn handler(self) -> Handler {
        match self {
            Stack::Raw => routes::handle,
            Stack::Framework => framework::handle,
        }
    }

    /// Whether its handler reads header fields (the codec then keeps them for it).
    pub fn reads_headers(self) -> bool {
        self == Stack::Framework
    }
}
