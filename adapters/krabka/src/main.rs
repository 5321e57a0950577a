//! fencecheck-krabka-adapter serves fencecheck's transport design (the seed's BrokerTransport)
//! on krabka 0.7.1 (krabka-client-producer, -consumer, -admin) behind the exec protocol
//! (docs/exec-protocol.md): one JSON request per line on stdin, one JSON answer per line on
//! stdout, krabka's and its own logs on stderr.
//!
//! A role is the transactional id `topic + "/" + role`. `acquire` builds the role's
//! transactional producer and calls `init_transactions`, which sends InitProducerId to the
//! role's coordinator; the token is the pair that producer reports with
//! `Producer::transactional_identity`, read right after `init_transactions` returned and before
//! any transaction began (a TV2 commit moves it). No `gateway-token`: the minted pair comes from
//! the producer that minted it. `describe` is the admin client's DescribeTransactions, so no
//! `no-describe` either: `hello` announces no capability.

mod adapter;
mod errors;
mod member;
mod protocol;

use std::sync::Arc;

use std::io::{BufRead as _, Write as _};

use tokio::sync::mpsc;
use tokio::task::JoinSet;

use crate::adapter::Adapter;
use crate::protocol::{line, Request};

fn main() {
    // --group-metadata polled (the default) or live: what a member's transact sends with its
    // offsets (member::GroupMetadata).
    let args: Vec<String> = std::env::args().skip(1).collect();
    let metadata = match args.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
        [] | ["--group-metadata", "polled"] => member::GroupMetadata::Polled,
        ["--group-metadata", "live"] => member::GroupMetadata::Live,
        _ => {
            eprintln!("usage: fencecheck-krabka-adapter [--group-metadata polled|live]");
            std::process::exit(2);
        }
    };
    // krabka logs through `tracing`: warnings and errors to stderr (harness.log), more with
    // FENCECHECK_KRABKA_LOG=info, debug or trace.
    let level = match std::env::var("FENCECHECK_KRABKA_LOG").as_deref() {
        Ok("trace") => tracing_subscriber::filter::LevelFilter::TRACE,
        Ok("debug") => tracing_subscriber::filter::LevelFilter::DEBUG,
        Ok("info") => tracing_subscriber::filter::LevelFilter::INFO,
        Ok("error") => tracing_subscriber::filter::LevelFilter::ERROR,
        _ => tracing_subscriber::filter::LevelFilter::WARN,
    };
    tracing_subscriber::fmt()
        .with_max_level(level)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .init();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(serve(metadata));
    // Producers' sender tasks may still be draining: do not wait for them.
    rt.shutdown_background();
}

async fn serve(metadata: member::GroupMetadata) {
    // stdout: one thread writes the answer lines in the order they are sent.
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let writer = std::thread::spawn(move || {
        let mut out = std::io::stdout().lock();
        for l in rx {
            if let Err(e) = out.write_all(l.as_bytes()).and_then(|()| out.flush()) {
                eprintln!("krabka-adapter: stdout: {e}");
                return;
            }
        }
    });
    // stdin: one thread reads the request lines.
    let (lines_tx, mut lines) = mpsc::unbounded_channel::<String>();
    std::thread::spawn(move || {
        for l in std::io::stdin().lock().lines() {
            match l {
                Ok(l) => {
                    if lines_tx.send(l).is_err() {
                        return;
                    }
                }
                Err(e) => {
                    eprintln!("krabka-adapter: stdin: {e}");
                    return;
                }
            }
        }
    });
    let adapter = Arc::new(Adapter::new(metadata));
    let mut calls = JoinSet::new();
    loop {
        while calls.try_join_next().is_some() {}
        let Some(next) = lines.recv().await else { break };
        if next.trim().is_empty() {
            continue;
        }
        let req: Request = match serde_json::from_str(&next) {
            Ok(r) => r,
            Err(e) => {
                // No id to answer: say so on stderr; the harness times the call out.
                eprintln!("krabka-adapter: malformed request line {next:?}: {e}");
                continue;
            }
        };
        match req.op.as_str() {
            "hello" | "start" | "member_start" => {
                // In order, before anything else.
                let r = adapter.handle(&req).await;
                log_failure(&req, &r);
                let _ = tx.send(line(req.id, r));
            }
            "close" => {
                while calls.join_next().await.is_some() {}
                adapter.shutdown().await;
                let _ = tx.send(line(req.id, Ok(Default::default())));
                break;
            }
            _ => {
                let a = Arc::clone(&adapter);
                let tx = tx.clone();
                calls.spawn(async move {
                    let r = a.handle(&req).await;
                    log_failure(&req, &r);
                    let _ = tx.send(line(req.id, r));
                });
            }
        }
    }
    // stdin ended or close was answered: stop what is still running.
    calls.abort_all();
    adapter.shutdown().await;
    drop(tx);
    let _ = writer.join();
}

fn log_failure(req: &Request, r: &Result<protocol::Answer, protocol::CallError>) {
    if let Err(e) = r {
        eprintln!(
            "krabka-adapter: {} {} id {}: {} {}: {}",
            req.op,
            req.role,
            req.id,
            if e.unknown { "unknown" } else { "fail" },
            e.kind,
            e.message
        );
    }
}
