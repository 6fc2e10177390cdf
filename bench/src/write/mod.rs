//! Layer 4, the writers: everything a run's figures become — the markdown tables printed
//! on stdout ([`table`], [`slo`], [`fidelity`], [`profile`], [`idle`], [`attack`], [`link`], [`post`]), the
//! results folder ([`files`]: JSON and CSV), the SVG charts ([`chart`]), the flame graphs
//! ([`profile`]) and report.html ([`page`]). They read only the model, so that `bench
//! --report DIR` redraws an old run from its results.json alone. A new section of the page
//! is a writer here and one entry in `page::write`.

pub mod attack;
pub mod chart;
pub mod fidelity;
pub mod files;
pub mod idle;
pub mod link;
pub mod page;
pub mod post;
pub mod profile;
pub mod slo;
pub mod soak;
pub mod table;
